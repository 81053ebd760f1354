"""A plain value the ranking rules accept (:class:`memory.rules.ranking.Rankable`).

Recall's own is :class:`memory.recall.candidates.Candidate`, built from a stored
row; the pure rules' tests need only the fields ranking reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Candidate:
    key: int
    cosine: float
    salience: float
    context_match: float
    last_confirmed_at: datetime | None
    updated_at: datetime | None
    created_at: datetime | None
    lexical: float = 0.0
    time: float = 0.0
