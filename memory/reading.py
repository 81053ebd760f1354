"""The read use cases: recall and its relatives, listings, counts, stats, export."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from memory.rules import lexical_length, query_time, ranking
from memory.rules.timestamps import format_timestamp
from storage import memories as store
from storage.rows import ScoredMemoryRow

from . import lexical, recall_hops, recall_latest, recall_rerank, recall_time
from .calls import CallMeta
from .commands.reading import (
    BuildContextPrompt,
    CountMemories,
    ExportMemories,
    GetMemory,
    ListMemories,
    ListTags,
    MemoryStats,
    Recall,
    TextSearch,
)
from .deps import Deps
from .errors import LIMIT_EXCEEDED, MemoryServiceError, not_found
from .shapes import explain_shape, full_shape, hop_explain_shape, match_shape

PROMPT_HEAD = "The following are previously known facts:"
PROMPT_SEPARATOR = "-----------------"
PROMPT_USER = "The following is the user's prompt:"
NO_FACTS = "No relevant previously known facts were found."


@dataclass(frozen=True)
class _Match:
    scored: ScoredMemoryRow
    #: Only when asked for (recall's ``explain``).
    explanation: ranking.Explanation | None
    #: Fresher returned matches that disagree with this one (latest truth first).
    older_than: list[int] = field(default_factory=list)
    #: Newer memories that named this one in ``downweights``.
    superseded_by: list[int] = field(default_factory=list)
    #: Moved up ahead of older matches it disagrees with.
    promoted: bool = False
    #: The span of time the question asks about, if it names one.
    window: query_time.Window | None = None
    #: Brought by a hop (``session`` or ``graph``): from which match.
    hop_from: int | None = None
    hop: recall_hops.Hop | None = None
    #: The reranker's score, and the match's 1-based place before it (when it scored it).
    rerank: tuple[float, int] | None = None
    #: What a long text kept of its lexical share (issue 28), when less than all.
    length: float | None = None


@dataclass(frozen=True)
class _FirstRanking:
    """Every candidate in the first ranking's order, and what the later steps need."""

    #: As found (what ``explain`` ranks each signal among).
    candidates: list[ranking.Candidate]
    ordered: list[ranking.Candidate]
    by_id: dict[int, ScoredMemoryRow]
    when: query_time.QuestionTime
    embedded: Any
    #: The query's weighted terms (term, weight).
    terms: list[tuple[str, float]]
    #: What a long candidate kept of its lexical share (only those below 1).
    length: dict[int, float] = field(default_factory=dict)


async def _ranked(
    deps: Deps,
    user_id: int,
    query: str,
    *,
    limit: int,
    min_score: float | None,
    tags: list[str],
    as_of: datetime | None = None,
    explain: bool = False,
) -> list[_Match]:
    """Hybrid recall: vector, lexical and time-window candidates, fused, then the learned
    ranking; the reranker's order when one is set (unless the question names a time or
    asks for the first); matches that disagree, the latest first (unless the
    question names a time); then the session and graph hops."""
    as_of = as_of or datetime.now(UTC)
    # The query is embedded while a connection is awaited and the lexical side
    # (which needs no embedding) runs; started first, it joins the other queries
    # waiting for the embedder (the local one batches them) even when the pool is busy.
    embedding = asyncio.ensure_future(deps.embedder.embed_one(query))
    try:
        async with deps.pool.connection() as conn:
            first = await _first_ranking(
                conn,
                deps,
                user_id,
                query,
                embedding,
                limit=limit,
                min_score=min_score,
                tags=tags,
                as_of=as_of,
            )
            order = [c.key for c in first.ordered]
            stage = deps.reranker
            asks = (
                stage is not None
                and first.when.window is None
                and first.when.order != "earliest"
                and stage.will_ask(len(order), limit=limit)
            )
            if not asks:
                reranked = recall_rerank.Reranked(order)
                marked, hopped = await _settled(
                    conn, deps, user_id, first, order, limit=limit, min_score=min_score,
                    tags=tags, as_of=as_of,
                )  # fmt: skip
        if asks:
            # No connection is held while the reranker is asked.
            assert stage is not None
            read = order[: stage.read(len(order), limit=limit)]
            texts = {key: first.by_id[key].row.text for key in read}
            reranked = await stage.rerank(query, order, texts, limit=limit)
            async with deps.pool.connection() as conn:
                marked, hopped = await _settled(
                    conn, deps, user_id, first, reranked.order, limit=limit,
                    min_score=min_score, tags=tags, as_of=as_of,
                )  # fmt: skip
    except BaseException as ex:
        embedding.cancel()
        outcome = (await asyncio.gather(embedding, return_exceptions=True))[0]
        if isinstance(outcome, Exception) and outcome is not ex:
            raise outcome from None  # an embedding failure is the one to report
        raise
    settings = deps.settings
    parts = (
        ranking.explain(
            first.candidates, w_s=settings.rank_salience_weight, w_c=settings.rank_context_weight
        )
        if explain
        else {}
    )
    by_id = {**first.by_id, **hopped.rows}
    return [
        _Match(
            by_id[key],
            parts.get(key),
            older_than=marked.older_than.get(key, []),
            superseded_by=marked.superseded_by.get(key, []),
            promoted=key in marked.promoted,
            window=first.when.window,
            hop_from=hopped.seed_of.get(key),
            hop=hopped.hop_of.get(key),
            rerank=(reranked.scores[key], reranked.first_rank[key])
            if key in reranked.scores
            else None,
            length=first.length.get(key),
        )
        for key in hopped.order
    ]


async def _first_ranking(
    conn: Any,
    deps: Deps,
    user_id: int,
    query: str,
    embedding: asyncio.Future[Any],
    *,
    limit: int,
    min_score: float | None,
    tags: list[str],
    as_of: datetime,
) -> _FirstRanking:
    """Every candidate of the query (vector, lexical, time window), fused and ranked."""
    w_s, w_c = deps.settings.rank_salience_weight, deps.settings.rank_context_weight
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
    times = {c.scored.row.id: recall_time.event_time(c.scored.row) for c in found}
    found = [c for c in found if query_time.visible(times[c.scored.row.id], when, as_of)]
    # A long text holds the question's words by its length: its share is scaled down
    # by its length (issue 28).
    length = {c.scored.row.id: lexical_length.length_factor(len(c.scored.row.text)) for c in found}
    share = {
        c.scored.row.id: ranking.lexical_share(c.lexical, terms) * length[c.scored.row.id]
        for c in found
    }
    boost = query_time.time_scores(
        {c.scored.row.id: times[c.scored.row.id] for c in found},
        when,
        {
            c.scored.row.id: ranking.fused_score(c.scored.cosine, share[c.scored.row.id])
            for c in found
        },
    )
    candidates = [
        ranking.Candidate(
            key=c.scored.row.id,
            cosine=c.scored.cosine,
            salience=c.scored.row.salience,
            context_match=c.scored.context_match,
            last_confirmed_at=c.scored.row.last_confirmed_at,
            updated_at=c.scored.row.updated_at,
            created_at=c.scored.row.created_at,
            lexical=share[c.scored.row.id],
            time=boost[c.scored.row.id],
        )
        for c in found
    ]
    # Every candidate in order: the reranker and the latest-truth step may pull one up
    # from below the limit.
    ordered = ranking.rank(candidates, w_s=w_s, w_c=w_c, min_score=min_score, limit=len(candidates))
    return _FirstRanking(
        candidates,
        ordered,
        {c.scored.row.id: c.scored for c in found},
        when,
        embedded,
        [(t.term, t.weight) for t in terms],
        {key: f for key, f in length.items() if f < 1.0},
    )


async def _settled(
    conn: Any,
    deps: Deps,
    user_id: int,
    first: _FirstRanking,
    order: list[int],
    *,
    limit: int,
    min_score: float | None,
    tags: list[str],
    as_of: datetime,
) -> tuple[recall_latest.Marked, recall_hops.Hopped]:
    """``order`` cut to the limit: the latest truth first, then the hops' additions."""
    when, by_id = first.when, first.by_id
    marked = (
        await recall_latest.latest_first(
            conn,
            user_id,
            [by_id[key].row for key in order],
            limit=limit,
            relations=deps.settings.relation_extractor != "off",
        )
        # A question about a time asks what held then, not what holds now; one
        # that asks for the first wants the earliest, not the latest.
        if deps.settings.recall_latest_first and when.window is None and when.order != "earliest"
        else recall_latest.Marked(order[:limit])
    )
    settings = deps.settings
    sessions = settings.recall_session_hop
    relations = settings.recall_graph_hop and settings.relation_extractor != "off"
    hopped = (
        await recall_hops.hop(
            conn,
            user_id,
            marked.order,
            first.embedded,
            session_of={key: by_id[key].row.session_id for key in marked.order},
            sessions=sessions,
            relations=relations,
            terms=first.terms,
            limit=limit,
            min_score=min_score,
            tags=tags,
            visible=lambda row: query_time.visible(recall_time.event_time(row), when, as_of),
        )
        if sessions or relations
        else recall_hops.Hopped(marked.order)
    )
    return marked, hopped


async def recall(deps: Deps, meta: CallMeta, command: Recall) -> dict[str, Any]:
    """``recall`` and ``search_memory``."""
    explain = command.explain
    found = await _ranked(
        deps,
        meta.user_id,
        command.query,
        limit=command.limit,
        min_score=command.min_score,
        tags=list(command.tags),
        as_of=command.as_of,
        explain=explain,
    )
    matches = []
    for m in found:
        shape = match_shape(m.scored.row, m.scored.cosine)
        if m.older_than:
            shape["older_than"] = m.older_than
        if m.superseded_by:
            shape["superseded_by"] = m.superseded_by
        if explain and m.hop is not None and m.hop_from is not None:
            shape["explain"] = hop_explain_shape(m.scored.cosine, m.hop, m.hop_from)
        elif m.explanation is not None:
            shape["explain"] = explain_shape(
                m.explanation,
                latest_first=m.promoted,
                window=m.window,
                rerank=m.rerank,
                length=m.length,
            )
        matches.append(shape)
    return {"ok": True, "matches": matches}


async def build_context_prompt(
    deps: Deps, meta: CallMeta, command: BuildContextPrompt
) -> dict[str, Any]:
    user_prompt, max_chars = command.user_prompt, command.max_chars
    found = await _ranked(
        deps,
        meta.user_id,
        user_prompt,
        limit=command.limit,
        min_score=command.min_score,
        tags=list(command.tags),
        as_of=command.as_of,
    )
    tail = f"\n\n{PROMPT_SEPARATOR}\n\n{PROMPT_USER}\n\n{user_prompt}"
    head = f"{PROMPT_HEAD}\n\n"
    facts: list[str] = []
    used: list[int] = []
    for m in found:
        c = m.scored
        candidate = "\n\n".join([*facts, c.row.text])
        # Greedy: stop at the first fact that would overflow; the best fact always goes in.
        if max_chars is not None and facts and len(head) + len(candidate) + len(tail) > max_chars:
            break
        facts.append(c.row.text)
        used.append(c.row.id)
    body = "\n\n".join(facts) if facts else NO_FACTS
    return {"ok": True, "prompt": f"{head}{body}{tail}", "memory_ids": used}


async def list_memories(deps: Deps, meta: CallMeta, command: ListMemories) -> dict[str, Any]:
    f = command.filters.memory_filter()
    async with deps.pool.connection() as conn:
        rows = await store.list_memories(
            conn, meta.user_id, f, limit=command.limit, offset=command.offset
        )
    return {
        "ok": True,
        "memories": [match_shape(r) for r in rows],
        "count": len(rows),
        "offset": command.offset,
    }


async def text_search(deps: Deps, meta: CallMeta, command: TextSearch) -> dict[str, Any]:
    async with deps.pool.connection() as conn:
        rows = await store.text_search(conn, meta.user_id, command.text, limit=command.limit)
    return {"ok": True, "memories": [match_shape(r) for r in rows], "count": len(rows)}


async def get_memory(deps: Deps, meta: CallMeta, command: GetMemory) -> dict[str, Any]:
    async with deps.pool.connection() as conn:
        row = await store.get_memory(conn, meta.user_id, command.id)
    if row is None:
        raise not_found(command.id)
    return {"ok": True, "memory": full_shape(row)}


async def count_memories(deps: Deps, meta: CallMeta, command: CountMemories) -> dict[str, Any]:
    async with deps.pool.connection() as conn:
        count = await store.count_memories(conn, meta.user_id, command.filters.memory_filter())
    return {"ok": True, "count": count}


async def memory_stats(deps: Deps, meta: CallMeta, command: MemoryStats) -> dict[str, Any]:
    async with deps.pool.connection() as conn:
        stats = await store.store_stats(conn, meta.user_id, top_tags=10)
    return {
        "ok": True,
        "total": stats.total,
        "active": stats.active,
        "soft_deleted": stats.soft_deleted,
        "expired": stats.expired,
        "avg_importance": None
        if stats.avg_importance is None
        else round(float(stats.avg_importance), 4),
        "oldest_created_at": format_timestamp(stats.oldest_created_at),
        "newest_created_at": format_timestamp(stats.newest_created_at),
        "top_tags": [{"tag": t.tag, "count": t.count} for t in stats.top_tags],
        "by_provider": [{"provider": p.provider, "count": p.count} for p in stats.by_provider],
    }


async def list_tags(deps: Deps, meta: CallMeta, command: ListTags) -> dict[str, Any]:
    async with deps.pool.connection() as conn:
        tags = await store.tag_counts(
            conn, meta.user_id, include_deleted=command.include_deleted, limit=command.limit
        )
    return {"ok": True, "tags": [{"tag": t.tag, "count": t.count} for t in tags]}


async def export_memories(deps: Deps, meta: CallMeta, command: ExportMemories) -> dict[str, Any]:
    cap = deps.settings.export_max_rows
    # One snapshot: the count and the rows agree.
    async with deps.pool.connection() as conn, conn.transaction():
        rows = await store.export_rows(
            conn, meta.user_id, include_deleted=command.include_deleted, limit=cap + 1
        )
    if len(rows) > cap:
        raise MemoryServiceError(
            LIMIT_EXCEEDED,
            f"The store holds more than {cap} memories, the export cap; use `ownsona export` "
            "for an out-of-band dump.",
            {"limit": cap},
        )
    return {"ok": True, "count": len(rows), "memories": [full_shape(r) for r in rows]}
