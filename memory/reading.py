"""The read use cases: recall and its relatives, listings, counts, stats, export."""

from __future__ import annotations

from typing import Any

from memory.rules.timestamps import format_timestamp
from storage import memories as store

from .calls import CallMeta
from .commands.handling import handles
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
from .recall.pipeline import ranked
from .shapes import explain_shape, full_shape, hop_explain_shape, match_shape

PROMPT_HEAD = "The following are previously known facts:"
PROMPT_SEPARATOR = "-----------------"
PROMPT_USER = "The following is the user's prompt:"
NO_FACTS = "No relevant previously known facts were found."


@handles(Recall, reads=True)
async def recall(deps: Deps, meta: CallMeta, command: Recall) -> dict[str, Any]:
    """``recall`` and ``search_memory``."""
    explain = command.explain
    found = await ranked(
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
        shape = match_shape(m.row, m.cosine)
        if m.older_than:
            shape["older_than"] = m.older_than
        if m.superseded_by:
            shape["superseded_by"] = m.superseded_by
        if explain and m.hop is not None and m.hop_from is not None:
            shape["explain"] = hop_explain_shape(m.cosine, m.hop, m.hop_from)
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


@handles(BuildContextPrompt, reads=True)
async def build_context_prompt(
    deps: Deps, meta: CallMeta, command: BuildContextPrompt
) -> dict[str, Any]:
    user_prompt, max_chars = command.user_prompt, command.max_chars
    found = await ranked(
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
    for c in found:
        candidate = "\n\n".join([*facts, c.row.text])
        # Greedy: stop at the first fact that would overflow; the best fact always goes in.
        if max_chars is not None and facts and len(head) + len(candidate) + len(tail) > max_chars:
            break
        facts.append(c.row.text)
        used.append(c.row.id)
    body = "\n\n".join(facts) if facts else NO_FACTS
    return {"ok": True, "prompt": f"{head}{body}{tail}", "memory_ids": used}


@handles(ListMemories, reads=True)
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


@handles(TextSearch, reads=True)
async def text_search(deps: Deps, meta: CallMeta, command: TextSearch) -> dict[str, Any]:
    async with deps.pool.connection() as conn:
        rows = await store.text_search(conn, meta.user_id, command.text, limit=command.limit)
    return {"ok": True, "memories": [match_shape(r) for r in rows], "count": len(rows)}


@handles(GetMemory, reads=True)
async def get_memory(deps: Deps, meta: CallMeta, command: GetMemory) -> dict[str, Any]:
    async with deps.pool.connection() as conn:
        row = await store.get_memory(conn, meta.user_id, command.id)
    if row is None:
        raise not_found(command.id)
    return {"ok": True, "memory": full_shape(row)}


@handles(CountMemories, reads=True)
async def count_memories(deps: Deps, meta: CallMeta, command: CountMemories) -> dict[str, Any]:
    async with deps.pool.connection() as conn:
        count = await store.count_memories(conn, meta.user_id, command.filters.memory_filter())
    return {"ok": True, "count": count}


@handles(MemoryStats, reads=True)
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


@handles(ListTags, reads=True)
async def list_tags(deps: Deps, meta: CallMeta, command: ListTags) -> dict[str, Any]:
    async with deps.pool.connection() as conn:
        tags = await store.tag_counts(
            conn, meta.user_id, include_deleted=command.include_deleted, limit=command.limit
        )
    return {"ok": True, "tags": [{"tag": t.tag, "count": t.count} for t in tags]}


@handles(ExportMemories, reads=True)
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
