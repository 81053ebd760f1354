"""Ranking and feedback maths (SUPPLEMENT §4). Pure functions over plain values."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

#: Learning rate of salience updates.
LEARNING_RATE = 0.5
#: Salience step that ``confirm`` counts as.
CONFIRM_DELTA = 0.5
#: Salience step of a ``downweights`` entry on ``remember``.
DOWNWEIGHT_DELTA = -0.5

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def candidate_count(limit: int) -> int:
    """How many nearest rows to fetch before re-ranking: at least 4 x limit and 40."""
    return max(4 * limit, 40)


def blended_score(cosine: float, salience: float, context_match: float, w_s: float, w_c: float) -> float:
    """``cosine · (1 + w_s·salience + w_c·context_match)``: orders results, never reported."""
    return cosine * (1.0 + w_s * salience + w_c * max(0.0, context_match))


def next_salience(salience: float, delta: float, rate: float = LEARNING_RATE) -> float:
    """One feedback step; stays inside [-1, 1] for any delta in [-1, 1]."""
    if delta > 0:
        value = salience + rate * delta * (1.0 - salience)
    elif delta < 0:
        value = salience + rate * delta * (1.0 + salience)
    else:
        value = salience
    return min(1.0, max(-1.0, value))


@dataclass(frozen=True)
class Candidate:
    """What ranking needs to know about one candidate row."""

    key: int
    cosine: float
    salience: float
    context_match: float
    last_confirmed_at: datetime | None
    updated_at: datetime | None
    created_at: datetime | None


def rank(
    candidates: Sequence[Candidate], *, w_s: float, w_c: float, min_score: float | None, limit: int
) -> list[Candidate]:
    """Filter on raw cosine, order by the blended score, newest first on ties."""

    def ts(value: datetime | None) -> float:
        return (value or _EPOCH).timestamp()

    kept = [c for c in candidates if min_score is None or c.cosine >= min_score]
    kept.sort(
        key=lambda c: (
            round(blended_score(c.cosine, c.salience, c.context_match, w_s, w_c), 9),
            ts(c.last_confirmed_at),
            ts(c.updated_at),
            ts(c.created_at),
        ),
        reverse=True,
    )
    return kept[:limit]
