"""Recall's optional second stage: a cross-encoder re-orders the first ranking's best.

A cross-encoder reads the question and a memory together, so it can tell
"what does Ana's daughter study?" from a memory that merely shares its words;
it is also too slow to read every memory. It re-orders the first ``depth``
candidates of the first ranking (RERANK_CANDIDATES, at least the recall's
limit); the rest keep their places after them. The match's ``score`` stays
the raw cosine (the chapter's meaning); ``explain`` shows the reranker's score
and the match's place before it.

A reranker that fails (down, slow, malformed answer) costs the recall its
second stage, never the recall: the first ranking is returned and a warning
is logged. A failure of the endpoint (unreachable, time-out, 5xx, 429, a
refused key) also leaves it alone for :data:`REST_S`, so that a dead endpoint
does not add its time-out to every recall; one the request itself caused (a
400, 413 or 422: an input the model would not take) costs that call only.

A question that names a time ("last March") or asks for the first is not
reranked: the first ranking placed its matches in time, and a cross-encoder
knows nothing of when. One that asks for the latest is: the latest-truth step
after it still puts the freshest of disagreeing memories first.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .candidates import Candidate

logger = logging.getLogger(__name__)

#: Seconds without reranking after a failure.
REST_S = 30.0


class RerankError(Exception):
    """The reranker could not score the documents; the message holds no text and no key."""

    def __init__(self, message: str, *, endpoint_failed: bool = True) -> None:
        super().__init__(message)
        #: False when the request was refused for its input: the next one may do.
        self.endpoint_failed = endpoint_failed


class Reranker(Protocol):
    """A cross-encoder (``memory.providers.reranker.HttpReranker``)."""

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float | None]:
        """One score per document, in the documents' order (higher: more relevant; None:
        the reranker left it unscored)."""
        ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class Reranked:
    """The candidates' keys in their new order, and what the reranker said of those it read."""

    order: list[int]
    #: The reranker's score of each candidate it read.
    scores: dict[int, float] = field(default_factory=dict)
    #: Each read candidate's 1-based place in the first ranking.
    first_rank: dict[int, int] = field(default_factory=dict)


class RerankStage:
    """A reranker, how deep it reads, and the rest it takes after a failure."""

    def __init__(
        self,
        reranker: Reranker,
        *,
        depth: int,
        rest_s: float = REST_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reranker = reranker
        self.depth = depth
        self._rest_s = rest_s
        self._clock = clock
        self._resting_until = float("-inf")

    async def check(self) -> str | None:
        """Ask the reranker about two short texts: None when it answered, else what failed.

        Run once at start-up, so that a wrong RERANK_BASE_URL or key shows in the log
        before the first recall falls back; a failure rests the stage like any other.
        """
        try:
            await self._scores("Where do I live?", ["I live in Porto.", "I like tea."])
        except Exception as ex:
            return self._failed(ex, log=False)
        return None

    def read(self, candidates: int, *, limit: int) -> int:
        """How many of a recall's first candidates the reranker reads: ``max(limit, depth)``."""
        return min(candidates, max(limit, self.depth))

    def will_ask(self, candidates: int, *, limit: int) -> bool:
        """Whether :meth:`rerank` would ask the reranker about these candidates now."""
        return self.read(candidates, limit=limit) >= 2 and self._clock() >= self._resting_until

    async def rerank(
        self, query: str, order: Sequence[int], texts: Mapping[int, str], *, limit: int
    ) -> Reranked:
        """``order`` with its first ``max(limit, depth)`` keys re-ordered by the reranker.

        Ties keep their first-ranking order; candidates the reranker left unscored
        follow the scored ones. Unchanged when resting after a failure, or when the
        reranker fails.
        """
        if not self.will_ask(len(order), limit=limit):
            return Reranked(list(order))
        head = list(order[: self.read(len(order), limit=limit)])
        try:
            scores = await self._scores(query, [texts[key] for key in head])
        except Exception as ex:
            # Whatever went wrong, the recall goes on with its first ranking.
            self._failed(ex)
            return Reranked(list(order))
        by_key = {key: score for key, score in zip(head, scores, strict=True) if score is not None}
        place = {key: i for i, key in enumerate(head, start=1)}
        reordered = sorted(
            head, key=lambda key: (key not in by_key, -by_key.get(key, 0), place[key])
        )
        return Reranked([*reordered, *order[len(head) :]], by_key, place)

    async def _scores(self, query: str, texts: list[str]) -> list[float | None]:
        """The reranker's scores, one per text (else a RerankError)."""
        scores = await self.reranker.rerank(query, texts)
        if len(scores) != len(texts) or all(score is None for score in scores):
            raise RerankError(f"the reranker scored {len(scores)} of {len(texts)} texts")
        return scores

    def _failed(self, ex: Exception, *, log: bool = True) -> str:
        """Rest after a failure of the endpoint; what failed, as a log may say it."""
        said = str(ex) if isinstance(ex, RerankError) else f"unexpected {type(ex).__name__}"
        if isinstance(ex, RerankError) and not ex.endpoint_failed:
            if log:
                logger.warning("reranking failed, this recall uses its first ranking: %s", said)
            return said
        self._resting_until = self._clock() + self._rest_s
        if log:
            logger.warning(
                "reranking failed, recall uses its first ranking for %g s: %s", self._rest_s, said
            )
        return said


async def reordered(
    stage: RerankStage, query: str, ordered: Sequence[Candidate], *, limit: int
) -> list[Candidate]:
    """``ordered`` as the reranker re-ordered it (:meth:`RerankStage.rerank`), each
    candidate it read marked with its score and its place before."""
    order = [c.key for c in ordered]
    by_id = {c.key: c for c in ordered}
    read = order[: stage.read(len(order), limit=limit)]
    reranked = await stage.rerank(
        query, order, {key: by_id[key].row.text for key in read}, limit=limit
    )
    for key, score in reranked.scores.items():
        by_id[key].rerank = (score, reranked.first_rank[key])
    return [by_id[key] for key in reranked.order]
