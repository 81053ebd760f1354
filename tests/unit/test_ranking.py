"""Learned ranking maths (SUPPLEMENT §4): pure functions, tables of cases, no fixtures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memory.learning import next_centroid
from memory.rules.ranking import (
    CONFIRM_DELTA,
    DOWNWEIGHT_DELTA,
    LEARNING_RATE,
    blended_score,
    candidate_count,
    next_salience,
    rank,
)

from .rankable import Candidate

# --- salience: s <- s + a·d·(1 - s) for d > 0, s <- s + a·d·(1 + s) for d < 0, a = 0.5

SALIENCE = [
    # (salience, delta, expected)
    (0.0, 1.0, 0.5),
    (0.5, 1.0, 0.75),
    (0.75, 1.0, 0.875),
    (0.0, 0.5, 0.25),  # confirm's step
    (0.25, 0.5, 0.4375),
    (0.0, -1.0, -0.5),
    (-0.5, -1.0, -0.75),
    (0.0, -0.5, -0.25),  # a downweight's step
    (0.5, -1.0, -0.25),  # 0.5 + 0.5·(-1)·(1 + 0.5)
    (0.5, 0.0, 0.5),  # a zero step changes nothing
    (1.0, 1.0, 1.0),  # the ceiling holds
    (-1.0, -1.0, -1.0),  # and the floor
    (1.0, -1.0, 0.0),
    (-1.0, 1.0, 0.0),
    (0.2, 0.3, 0.2 + 0.5 * 0.3 * 0.8),
    (-0.4, -0.6, -0.4 - 0.5 * 0.6 * 0.6),
]


@pytest.mark.parametrize(("salience", "delta", "expected"), SALIENCE)
def test_next_salience(salience: float, delta: float, expected: float) -> None:
    assert next_salience(salience, delta) == pytest.approx(expected)


def test_salience_constants_match_the_supplement() -> None:
    assert LEARNING_RATE == 0.5 and CONFIRM_DELTA == 0.5 and DOWNWEIGHT_DELTA == -0.5


def test_salience_stays_in_range_for_any_sequence() -> None:
    rng = np.random.default_rng(7)
    s = 0.0
    for delta in rng.uniform(-1, 1, 2000):
        s = next_salience(s, float(delta))
        assert -1.0 <= s <= 1.0


def test_repeated_positive_feedback_converges_without_overshoot() -> None:
    values = [0.0]
    for _ in range(30):
        values.append(next_salience(values[-1], 1.0))
    assert values == sorted(values) and values[-1] < 1.0 + 1e-12 and values[-1] > 0.999


# --- blended score: cosine · (1 + w_s·salience + w_c·context_match)

BLENDED = [
    # (cosine, salience, context_match, w_s, w_c, expected)
    (0.8, 0.0, 0.0, 0.2, 0.2, 0.8),
    (0.8, 0.5, 0.0, 0.2, 0.2, 0.8 * 1.1),
    (0.8, 0.5, 1.0, 0.2, 0.2, 0.8 * 1.3),
    (0.8, -0.5, 0.0, 0.2, 0.2, 0.8 * 0.9),
    (0.8, 0.0, -0.7, 0.2, 0.2, 0.8),  # context_match is clamped at 0
    (0.5, 1.0, 1.0, 0.0, 0.0, 0.5),  # weights off: plain cosine
    (0.6, 1.0, 0.5, 1.0, 2.0, 0.6 * 3.0),
    (0.0, 1.0, 1.0, 0.2, 0.2, 0.0),
]


@pytest.mark.parametrize(("cosine", "salience", "context", "w_s", "w_c", "expected"), BLENDED)
def test_blended_score(
    cosine: float, salience: float, context: float, w_s: float, w_c: float, expected: float
) -> None:
    assert blended_score(cosine, salience, context, w_s, w_c) == pytest.approx(expected)


@pytest.mark.parametrize(("limit", "expected"), [(1, 40), (8, 40), (10, 40), (11, 44), (50, 200)])
def test_candidate_count_is_at_least_4x_limit_and_40(limit: int, expected: int) -> None:
    assert candidate_count(limit) == expected


# --- rank: order by the blended score, filter on raw cosine, newest first on ties

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def cand(
    key: int,
    cosine: float,
    salience: float = 0.0,
    context: float = 0.0,
    *,
    confirmed: int | None = None,
    updated: int = 0,
    created: int = 0,
) -> Candidate:
    return Candidate(
        key=key,
        cosine=cosine,
        salience=salience,
        context_match=context,
        last_confirmed_at=None if confirmed is None else T0 + timedelta(days=confirmed),
        updated_at=T0 + timedelta(days=updated),
        created_at=T0 + timedelta(days=created),
    )


RANK_CASES = [
    ("plain cosine order", [cand(1, 0.7), cand(2, 0.9), cand(3, 0.8)], None, 10, [2, 3, 1]),
    (
        "salience lifts a slightly weaker match",
        [cand(1, 0.80), cand(2, 0.78, salience=0.5)],
        None,
        10,
        [2, 1],
    ),
    ("negative salience demotes", [cand(1, 0.80, salience=-0.5), cand(2, 0.78)], None, 10, [2, 1]),
    ("learned context lifts", [cand(1, 0.80), cand(2, 0.75, context=0.9)], None, 10, [2, 1]),
    (
        "a big cosine gap beats learning",
        [cand(1, 0.90), cand(2, 0.50, salience=1.0, context=1.0)],
        None,
        10,
        [1, 2],
    ),
    (
        "min_score filters on cosine, not the blend",
        [cand(1, 0.50, salience=1.0), cand(2, 0.61)],
        0.6,
        10,
        [2],
    ),
    ("min_score keeps an equal cosine", [cand(1, 0.6)], 0.6, 10, [1]),
    ("limit", [cand(i, 0.5 + i / 100) for i in range(10)], None, 3, [9, 8, 7]),
    (
        "ties: newest confirmation first",
        [cand(1, 0.8, confirmed=1), cand(2, 0.8, confirmed=5)],
        None,
        10,
        [2, 1],
    ),
    (
        "ties: confirmed beats never confirmed",
        [cand(1, 0.8, updated=9), cand(2, 0.8, confirmed=0)],
        None,
        10,
        [2, 1],
    ),
    ("ties: then updated_at", [cand(1, 0.8, updated=3), cand(2, 0.8, updated=2)], None, 10, [1, 2]),
    ("ties: then created_at", [cand(1, 0.8, created=1), cand(2, 0.8, created=2)], None, 10, [2, 1]),
    ("no candidates", [], None, 5, []),
]


@pytest.mark.parametrize(
    ("name", "candidates", "min_score", "limit", "expected"),
    RANK_CASES,
    ids=[c[0] for c in RANK_CASES],
)
def test_rank(
    name: str, candidates: list[Candidate], min_score: float | None, limit: int, expected: list[int]
) -> None:
    got = rank(candidates, w_s=0.2, w_c=0.2, min_score=min_score, limit=limit)
    assert [c.key for c in got] == expected


def test_rank_leaves_the_cosine_untouched() -> None:
    before = [cand(1, 0.80), cand(2, 0.78, salience=1.0, context=1.0)]
    after = rank(before, w_s=0.2, w_c=0.2, min_score=None, limit=10)
    assert {c.key: c.cosine for c in after} == {1: 0.80, 2: 0.78}


def test_rank_has_no_time_decay() -> None:
    """An old row and a new row with the same cosine and salience differ only as a tie-break."""
    old = cand(1, 0.8, salience=0.5, created=-3650, updated=-3650)
    new = cand(2, 0.79, salience=0.5, created=0, updated=0)
    assert [c.key for c in rank([new, old], w_s=0.2, w_c=0.2, min_score=None, limit=2)] == [1, 2]


# --- context centroid: c <- normalize(c·n + q)


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float64)
    return (v / np.linalg.norm(v)).astype(np.float32)


CENTROIDS = [
    # (centroid, count, query, expected)
    (None, 0, unit(1, 0, 0), unit(1, 0, 0)),
    (unit(1, 0, 0), 1, unit(0, 1, 0), unit(1, 1, 0)),
    (unit(1, 0, 0), 3, unit(0, 1, 0), unit(3, 1, 0)),
    (unit(1, 1, 0), 2, unit(0, 0, 1), unit(2 / np.sqrt(2), 2 / np.sqrt(2), 1)),
    (unit(1, 0, 0), 0, unit(0, 0, 1), unit(0, 0, 1)),  # a zero count starts over
    (unit(1, 0, 0), 1, unit(1, 0, 0), unit(1, 0, 0)),
]


@pytest.mark.parametrize(("centroid", "count", "query", "expected"), CENTROIDS)
def test_next_centroid(
    centroid: np.ndarray | None, count: int, query: np.ndarray, expected: np.ndarray
) -> None:
    got = next_centroid(centroid, count, query)
    assert got.dtype == np.float32
    assert np.allclose(got, expected, atol=1e-6)
    assert np.linalg.norm(got) == pytest.approx(1.0, abs=1e-6)


def test_centroid_follows_the_supplement_formula_over_a_sequence() -> None:
    """SUPPLEMENT §4 pins the update, c <- normalize(c·n + q), n += 1, step by step."""
    rng = np.random.default_rng(3)
    queries = [unit(*rng.normal(size=16)) for _ in range(12)]
    centroid, expected = None, np.zeros(16)
    for n, q in enumerate(queries):
        centroid = next_centroid(centroid, n, q)
        expected = expected * n + q.astype(np.float64)
        expected /= np.linalg.norm(expected)
        assert np.allclose(centroid, expected, atol=1e-5)


def test_centroid_of_two_queries_is_their_normalised_mean() -> None:
    a, b = unit(1, 2, 0), unit(0, 1, 3)
    both = next_centroid(next_centroid(None, 0, a), 1, b)
    mean = (a.astype(np.float64) + b) / 2
    assert np.allclose(both, mean / np.linalg.norm(mean), atol=1e-6)


def test_opposite_query_that_cancels_the_history_starts_over() -> None:
    got = next_centroid(unit(1, 0), 1, unit(-1, 0))
    assert np.allclose(got, unit(-1, 0))
