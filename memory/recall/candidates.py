"""The one candidate of a recall, from the storage row to the returned match.

A :class:`Candidate` is built once, from the row a search or a hop read
(:func:`from_row`), and each stage of :mod:`memory.recall` adds what it learns
to it: the first ranking its lexical share, its time boost and (for
``explain``) its :class:`~memory.rules.ranking.Explanation`; the reranker its
score and first place; the latest-truth step its markers; a hop what brought
it. Candidates live for one recall and are marked in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from memory.rules.query_time import Window
from memory.rules.ranking import Explanation
from storage.rows import MemoryRow, ScoredMemoryRow

#: Which hop brought a match.
Hop = Literal["session", "graph"]


@dataclass(slots=True, eq=False)
class Candidate:
    """A memory a recall considers, and what its stages have said of it so far.

    Satisfies :class:`memory.rules.ranking.Rankable`: the ranking rules read it as is.
    """

    row: MemoryRow
    #: Raw cosine to the question (the match's reported ``score``; ``min_score`` filters on it).
    cosine: float
    #: Cosine of the question to the memory's learned context (0 without one).
    context_match: float
    #: Lexical share in [0, 1] (:func:`memory.rules.ranking.lexical_share`).
    lexical: float = 0.0
    #: What the question's time adds to the relevance (:mod:`memory.rules.query_time`).
    time: float = 0.0
    #: The span of time the question asks about, when it names one (what ``time`` judged).
    window: Window | None = None
    #: The parts of its first ranking (recall's ``explain`` only).
    explanation: Explanation | None = None
    #: What a long text kept of its lexical share, when less than all (issue 28;
    #: ``lexical`` is already scaled by it).
    length: float | None = None
    #: The reranker's score and the 1-based place before it (when it read this one).
    rerank: tuple[float, int] | None = None
    #: Fresher returned matches that disagree with this one (latest truth first).
    older_than: list[int] = field(default_factory=list)
    #: Newer memories that named this one in ``downweights``.
    superseded_by: list[int] = field(default_factory=list)
    #: Moved up ahead of older matches it disagrees with.
    promoted: bool = False
    #: Brought by a hop: which one, and from which match.
    hop: Hop | None = None
    hop_from: int | None = None

    @property
    def key(self) -> int:
        return self.row.id

    @property
    def salience(self) -> float:
        return self.row.salience

    @property
    def last_confirmed_at(self) -> datetime | None:
        return self.row.last_confirmed_at

    @property
    def updated_at(self) -> datetime | None:
        return self.row.updated_at

    @property
    def created_at(self) -> datetime | None:
        return self.row.created_at


def from_row(scored: ScoredMemoryRow, *, lexical: float = 0.0) -> Candidate:
    """The candidate of a searched row: the one place a storage row becomes a candidate."""
    return Candidate(scored.row, scored.cosine, scored.context_match, lexical)
