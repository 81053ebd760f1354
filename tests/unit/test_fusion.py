"""Hybrid recall maths (memory.rules.ranking): IDF, probe terms, lexical share, fusion, explain."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from memory.rules import ranking
from memory.rules.ranking import QueryTerm

from .rankable import Candidate


def _t(term: str, docs: int, total: int = 1000) -> QueryTerm:
    return QueryTerm(term, docs, ranking.idf(docs, total))


@pytest.mark.parametrize(
    ("docs", "total", "expected"),
    [
        (0, 0, math.log(2.0)),
        (0, 1000, math.log(1 + 1000.5 / 0.5)),
        (1, 1000, math.log(1 + 999.5 / 1.5)),
        (500, 1000, math.log(1 + 500.5 / 500.5)),
        (1000, 1000, math.log(1 + 0.5 / 1000.5)),
        (5, 3, math.log(1 + 0.5 / 5.5)),  # a stale total never makes a weight negative
    ],
)
def test_idf(docs, total, expected):
    assert ranking.idf(docs, total) == pytest.approx(expected)
    assert ranking.idf(docs, total) > 0


def test_idf_falls_as_a_term_gets_common():
    weights = [ranking.idf(d, 10_000) for d in (0, 1, 10, 100, 1000, 10_000)]
    assert weights == sorted(weights, reverse=True)


@pytest.mark.parametrize(
    ("term_docs", "total", "max_terms", "expected"),
    [
        ([], 10, 32, []),
        ([("cat", 3), ("zyx", 0), ("like", 9)], 10, 32, ["zyx", "cat", "like"]),
        ([("b", 2), ("a", 2)], 10, 32, ["a", "b"]),  # equal counts: by term
        ([("a", 1), ("b", 2), ("c", 3)], 10, 2, ["a", "b"]),  # the rarest are kept
        ([("a", 1), ("a", 4), ("", 0)], 10, 32, ["a"]),  # repeats and empty terms collapse
    ],
)
def test_weigh_terms_rarest_first(term_docs, total, max_terms, expected):
    got = ranking.weigh_terms(term_docs, total, max_terms=max_terms)
    assert [t.term for t in got] == expected
    assert [t.weight for t in got] == sorted((t.weight for t in got), reverse=True)
    for t in got:
        assert t.weight == pytest.approx(ranking.idf(t.docs, total))


@pytest.mark.parametrize(
    ("terms", "budget", "expected"),
    [
        ([], 100, []),
        ([_t("a", 10), _t("b", 20), _t("c", 30)], 100, ["a", "b", "c"]),
        ([_t("a", 10), _t("b", 20), _t("c", 80)], 100, ["a", "b"]),  # c would pass the budget
        (
            [_t("c", 80), _t("a", 10), _t("b", 20)],
            100,
            ["a", "b"],
        ),  # order of the input is irrelevant
        ([_t("a", 150), _t("b", 200)], 100, []),  # only common words: no probe, vector side only
        ([_t("new", 0), _t("a", 5)], 100, ["a"]),  # a term in no row finds nothing
        ([_t("a", 100)], 100, ["a"]),  # the budget is inclusive
    ],
)
def test_probe_terms(terms, budget, expected):
    assert ranking.probe_terms(terms, budget=budget) == expected


def test_probe_is_every_term_below_the_budget():
    terms = [_t(f"w{i}", i + 1) for i in range(20)]  # 210 rows in all
    assert ranking.probe_terms(terms, budget=ranking.PROBE_ROWS) == [t.term for t in terms]


@pytest.mark.parametrize(
    ("matched", "weights", "expected"),
    [
        (0.0, [1.0, 3.0], 0.0),
        (1.0, [1.0, 3.0], 0.25),
        (4.0, [1.0, 3.0], 1.0),
        (5.0, [1.0, 3.0], 1.0),  # clipped
        (1.0, [], 0.0),  # a query without terms has no lexical side
        (0.0, [0.0], 0.0),
    ],
)
def test_lexical_share(matched, weights, expected):
    terms = [QueryTerm(f"t{i}", 1, w) for i, w in enumerate(weights)]
    assert ranking.lexical_share(matched, terms) == pytest.approx(expected)


def test_a_term_missing_from_the_store_still_counts_in_the_share():
    # "automobile" is in no memory: a row matching only "purchase" holds only part of the query.
    terms = ranking.weigh_terms([("automobile", 0), ("purchase", 3)], 100)
    share = ranking.lexical_share(terms[1].weight, terms)
    assert 0 < share < 0.5


@pytest.mark.parametrize(
    ("cosine", "lexical", "w_l", "expected"),
    [
        (0.5, 0.0, 0.8, 0.5),
        (0.5, 1.0, 0.8, 1.3),
        (0.2, 0.5, 0.8, 0.6),
        (0.7, 1.0, 0.0, 0.7),
        (-0.1, 0.25, 0.8, 0.1),
    ],
)
def test_fused_score(cosine, lexical, w_l, expected):
    assert ranking.fused_score(cosine, lexical, w_l) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("values", "skip_zero", "expected"),
    [
        ({}, False, {}),
        ({1: 0.2, 2: 0.9, 3: 0.5}, False, {2: 1, 3: 2, 1: 3}),
        ({1: 0.0, 2: 0.9, 3: 0.5}, True, {2: 1, 3: 2}),
        ({1: 0.5, 2: 0.5}, False, {1: 1, 2: 2}),  # ties: input order
    ],
)
def test_ordinal_ranks(values, skip_zero, expected):
    assert ranking.ordinal_ranks(values, skip_zero=skip_zero) == expected


_T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _c(
    key: int, cosine: float, lexical: float = 0.0, salience: float = 0.0, context: float = 0.0
) -> Candidate:
    return Candidate(key, cosine, salience, context, None, _T0, _T0, lexical)


@pytest.mark.parametrize(
    ("candidates", "min_score", "limit", "expected"),
    [
        # No query word anywhere: the order of SUPPLEMENT §4 (cosine, then learning).
        ([_c(1, 0.3), _c(2, 0.6), _c(3, 0.5)], None, 10, [2, 3, 1]),
        # A rare name lifts a row the cosine ranks last to the top.
        ([_c(1, 0.2, lexical=1.0), _c(2, 0.6), _c(3, 0.5)], None, 10, [1, 2, 3]),
        # A word match weighs less than a clearly better meaning.
        ([_c(1, 0.1, lexical=0.3), _c(2, 0.6), _c(3, 0.25)], None, 10, [2, 1, 3]),
        # min_score is on the raw cosine, even for the best fused row.
        ([_c(1, 0.2, lexical=1.0), _c(2, 0.6), _c(3, 0.5)], 0.4, 10, [2, 3]),
        ([_c(1, 0.2, lexical=1.0), _c(2, 0.6), _c(3, 0.5)], None, 2, [1, 2]),
        # Salience multiplies the fused relevance.
        ([_c(1, 0.5, lexical=0.5), _c(2, 0.9, salience=0.0)], None, 10, [1, 2]),
        ([_c(1, 0.5, lexical=0.5, salience=-1.0), _c(2, 0.9)], None, 10, [2, 1]),
        # Learned context too.
        ([_c(1, 0.5), _c(2, 0.45, context=1.0)], None, 10, [2, 1]),
    ],
)
def test_rank_with_fusion(candidates, min_score, limit, expected):
    got = ranking.rank(candidates, w_s=0.2, w_c=0.2, min_score=min_score, limit=limit)
    assert [c.key for c in got] == expected


def test_rank_without_lexical_weight_is_the_plain_blend():
    cands = [_c(1, 0.2, lexical=1.0), _c(2, 0.6), _c(3, 0.5, salience=0.5)]
    got = ranking.rank(cands, w_s=0.2, w_c=0.2, min_score=None, limit=10, w_l=0.0)
    assert [c.key for c in got] == [2, 3, 1]


def test_explain_parts_add_up():
    cands = [
        _c(1, 0.2, lexical=1.0),
        _c(2, 0.6, salience=0.5, context=0.4),
        _c(3, 0.5, lexical=0.25, salience=-0.2),
    ]
    parts = ranking.explain(cands, w_s=0.2, w_c=0.2)
    assert {k: p.vector_rank for k, p in parts.items()} == {2: 1, 3: 2, 1: 3}
    assert {k: p.lexical_rank for k, p in parts.items()} == {1: 1, 3: 2, 2: None}
    assert parts[1].fused == pytest.approx(0.2 + ranking.LEXICAL_WEIGHT)
    assert parts[2].salience == pytest.approx(0.6 * 0.2 * 0.5)
    assert parts[2].context == pytest.approx(0.6 * 0.2 * 0.4)
    assert parts[3].salience < 0
    for c in cands:
        p = parts[c.key]
        assert p.cosine == c.cosine and p.lexical == c.lexical
        assert p.final == pytest.approx(p.fused + p.salience + p.context)
        assert p.final == pytest.approx(ranking.final_score(c, w_s=0.2, w_c=0.2))
    order = [c.key for c in ranking.rank(cands, w_s=0.2, w_c=0.2, min_score=None, limit=10)]
    assert order == sorted(parts, key=lambda k: -parts[k].final)
    assert {k: p.fused_rank for k, p in parts.items()} == {1: 1, 3: 2, 2: 3}  # 1.0, 0.7, 0.6


def test_candidate_count_is_unchanged():
    assert ranking.candidate_count(1) == 40
    assert ranking.candidate_count(20) == 80
