"""Recall's pipeline: the question read, its candidates found and ranked, then settled.

Hybrid recall: vector, lexical and time-window candidates, fused, then the
learned ranking (:mod:`memory.rules.ranking`, where the fused score is
computed); the reranker's order when one is set (unless the question names a
time or asks for the first); matches that disagree, the latest first (unless the
question names a time); then the session and graph hops. Every stage takes and
returns :class:`~memory.recall.candidates.Candidate`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memory.deps import Deps
from memory.rules import lexical_length, query_time, ranking
from storage import memories as store

from . import hops, lexical, rerank
from . import latest as latest_truth
from . import time as recall_time
from .candidates import Candidate, from_row


@dataclass(frozen=True)
class Question:
    """What recall has read of the question (not of any candidate)."""

    when: query_time.QuestionTime
    embedded: Any
    #: The query's weighted terms.
    terms: list[ranking.QueryTerm]


async def ranked(
    deps: Deps,
    user_id: int,
    query: str,
    *,
    limit: int,
    min_score: float | None,
    tags: list[str],
    as_of: datetime | None = None,
    explain: bool = False,
) -> list[Candidate]:
    """The matches of ``query``, at most ``limit``, best first, each marked by the stages
    (with its :class:`~memory.rules.ranking.Explanation` when ``explain``)."""
    as_of = as_of or datetime.now(UTC)
    # The query is embedded while a connection is awaited and the lexical side
    # (which needs no embedding) runs; started first, it joins the other queries
    # waiting for the embedder (the local one batches them) even when the pool is busy.
    embedding = asyncio.ensure_future(deps.embedder.embed_one(query))
    try:
        async with deps.pool.connection() as conn:
            question, candidates = await _candidates(
                conn, user_id, query, embedding, limit=limit, tags=tags, as_of=as_of
            )
            # Every candidate in order: the reranker and the latest-truth step may pull
            # one up from below the limit.
            settings = deps.settings
            ordered = ranking.rank(
                candidates,
                w_s=settings.rank_salience_weight,
                w_c=settings.rank_context_weight,
                min_score=min_score,
                limit=len(candidates),
            )
            stage = deps.reranker
            asks = (
                stage is not None
                and question.when.window is None
                and question.when.order != "earliest"
                and stage.will_ask(len(ordered), limit=limit)
            )
            if not asks:
                found = await _settled(
                    conn, deps, user_id, question, candidates, ordered, limit=limit,
                    min_score=min_score, tags=tags, as_of=as_of,
                )  # fmt: skip
        if asks:
            # No connection is held while the reranker is asked.
            assert stage is not None
            ordered = await rerank.reordered(stage, query, ordered, limit=limit)
            async with deps.pool.connection() as conn:
                found = await _settled(
                    conn, deps, user_id, question, candidates, ordered, limit=limit,
                    min_score=min_score, tags=tags, as_of=as_of,
                )  # fmt: skip
    except BaseException as ex:
        embedding.cancel()
        outcome = (await asyncio.gather(embedding, return_exceptions=True))[0]
        if isinstance(outcome, Exception) and outcome is not ex:
            raise outcome from None  # an embedding failure is the one to report
        raise
    if explain:
        parts = ranking.explain(
            candidates,
            w_s=deps.settings.rank_salience_weight,
            w_c=deps.settings.rank_context_weight,
        )
        for c in found:
            c.explanation = parts.get(c.key)
    return found


async def _candidates(
    conn: Any,
    user_id: int,
    query: str,
    embedding: asyncio.Future[Any],
    *,
    limit: int,
    tags: list[str],
    as_of: datetime,
) -> tuple[Question, list[Candidate]]:
    """The question, and every candidate of it (vector, lexical, time window) visible at
    its time, with its lexical share and what its time adds, as found."""
    side = await lexical.lexical_side(
        conn, user_id, query, candidates=ranking.lexical_candidate_count(limit), tags=tags
    )
    terms = side.terms
    when = await recall_time.read(conn, user_id, query, as_of)
    embedded = await embedding
    timely = await recall_time.window_ids(conn, user_id, embedded, when, limit=limit, tags=tags)
    found = await store.search_hybrid(
        conn,
        user_id,
        embedded,
        candidates=ranking.candidate_count(limit),
        exact=side.exact,
        terms=[(t.term, t.weight) for t in terms],
        lexical_ids=[*side.ids, *timely],
        tags=tags,
    )
    times = {s.row.id: recall_time.event_time(s.row) for s in found}
    candidates = []
    for s in found:
        if not query_time.visible(times[s.row.id], when, as_of):
            continue
        # A long text holds the question's words by its length: its share is scaled
        # down by its length (issue 28).
        factor = lexical_length.length_factor(s.row.chars)
        candidate = from_row(s, lexical=ranking.lexical_share(s.matched, terms) * factor)
        if factor < 1.0:
            candidate.length = factor
        candidates.append(candidate)
    boost = query_time.time_scores(
        {c.key: times[c.key] for c in candidates},
        when,
        {c.key: ranking.fused_score(c.cosine, c.lexical) for c in candidates},
    )
    for c in candidates:
        c.time, c.window = boost[c.key], when.window
    return Question(when, embedded, terms), candidates


async def _settled(
    conn: Any,
    deps: Deps,
    user_id: int,
    question: Question,
    candidates: list[Candidate],
    ordered: list[Candidate],
    *,
    limit: int,
    min_score: float | None,
    tags: list[str],
    as_of: datetime,
) -> list[Candidate]:
    """``ordered`` cut to the limit: the latest truth first, then the hops' additions."""
    settings = deps.settings
    when = question.when
    kept = (
        await latest_truth.latest_first(
            conn,
            user_id,
            ordered,
            limit=limit,
            relations=settings.relation_extractor != "off",
        )
        # A question about a time asks what held then, not what holds now; one
        # that asks for the first wants the earliest, not the latest.
        if settings.recall_latest_first and when.window is None and when.order != "earliest"
        else ordered[:limit]
    )
    sessions = settings.recall_session_hop
    relations = settings.recall_graph_hop and settings.relation_extractor != "off"
    if not (sessions or relations):
        return kept
    return await hops.hop(
        conn,
        user_id,
        kept,
        question.embedded,
        known={c.key: c for c in candidates},
        sessions=sessions,
        relations=relations,
        terms=question.terms,
        limit=limit,
        min_score=min_score,
        tags=tags,
        visible=lambda row: query_time.visible(recall_time.event_time(row), when, as_of),
    )
