"""Reads of ``memories`` by id and by the listing filters, and the store's counts.

Every function takes a connection: the caller owns the transaction. Every
query is scoped by ``user_id`` (SUPPLEMENT §1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row

from .memory_sql import ACTIVE, COLUMNS
from .rows import MemoryFilter, MemoryRow, ProviderCount, StoreStats, TagCount


async def get_memory(conn: AsyncConnection, user_id: int, memory_id: int) -> MemoryRow | None:
    """One row of the user's, soft-deleted or not."""
    cur = conn.cursor(row_factory=class_row(MemoryRow))
    await cur.execute(
        f"SELECT {COLUMNS} FROM memories WHERE id = %s AND user_id = %s", (memory_id, user_id)
    )
    return await cur.fetchone()


async def get_memories_for_update(
    conn: AsyncConnection, user_id: int, memory_ids: Sequence[int]
) -> dict[int, MemoryRow]:
    """The user's rows among ``memory_ids``, locked for this transaction."""
    if not memory_ids:
        return {}
    cur = conn.cursor(row_factory=class_row(MemoryRow))
    await cur.execute(
        f"SELECT {COLUMNS} FROM memories WHERE user_id = %s AND id = ANY(%s)"
        " ORDER BY id FOR UPDATE",
        (user_id, list(memory_ids)),
    )
    return {row.id: row for row in await cur.fetchall()}


def _filter_clause(f: MemoryFilter) -> tuple[str, dict[str, Any]]:
    clauses = [] if f.include_deleted else [ACTIVE]
    params: dict[str, Any] = {}
    if f.untagged_only:
        clauses.append("cardinality(tags) = 0")
    if f.min_chars is not None:
        clauses.append("char_length(text) >= %(min_chars)s")
        params["min_chars"] = f.min_chars
    if f.max_chars is not None:
        clauses.append("char_length(text) <= %(max_chars)s")
        params["max_chars"] = f.max_chars
    if f.not_confirmed_since is not None:
        clauses.append("(last_confirmed_at IS NULL OR last_confirmed_at < %(ncs)s)")
        params["ncs"] = f.not_confirmed_since
    if f.tags:
        clauses.append("tags && %(tags)s")
        params["tags"] = list(f.tags)
    if f.source_provider is not None:
        clauses.append("source_provider = %(source_provider)s")
        params["source_provider"] = f.source_provider
    return (" AND " + " AND ".join(clauses)) if clauses else "", params


async def list_memories(
    conn: AsyncConnection, user_id: int, f: MemoryFilter, *, limit: int, offset: int
) -> list[MemoryRow]:
    where, params = _filter_clause(f)
    cur = conn.cursor(row_factory=class_row(MemoryRow))
    await cur.execute(
        f"SELECT {COLUMNS} FROM memories WHERE user_id = %(user_id)s {where}"
        " ORDER BY created_at DESC, id DESC LIMIT %(limit)s OFFSET %(offset)s",
        {**params, "user_id": user_id, "limit": limit, "offset": offset},
    )
    return await cur.fetchall()


async def count_memories(conn: AsyncConnection, user_id: int, f: MemoryFilter) -> int:
    where, params = _filter_clause(f)
    cur = await conn.execute(
        f"SELECT count(*) FROM memories WHERE user_id = %(user_id)s {where}",
        {**params, "user_id": user_id},
    )
    row = await cur.fetchone()
    return int(row[0]) if row else 0


def _like_pattern(fragment: str) -> str:
    escaped = fragment.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


async def text_search(
    conn: AsyncConnection, user_id: int, fragment: str, *, limit: int
) -> list[MemoryRow]:
    """Active rows containing ``fragment``, case-insensitively (trigram-indexed)."""
    cur = conn.cursor(row_factory=class_row(MemoryRow))
    await cur.execute(
        f"SELECT {COLUMNS} FROM memories WHERE user_id = %s AND {ACTIVE}"
        " AND text ILIKE %s ORDER BY created_at DESC, id DESC LIMIT %s",
        (user_id, _like_pattern(fragment), limit),
    )
    return await cur.fetchall()


def _unless_included(include_deleted: bool) -> str:
    """The active-row condition to add to a WHERE, unless soft-deleted rows are wanted too."""
    return "" if include_deleted else f"AND {ACTIVE}"


async def export_rows(
    conn: AsyncConnection, user_id: int, *, include_deleted: bool, limit: int
) -> list[MemoryRow]:
    where = _unless_included(include_deleted)
    cur = conn.cursor(row_factory=class_row(MemoryRow))
    await cur.execute(
        f"SELECT {COLUMNS} FROM memories WHERE user_id = %s {where}"
        " ORDER BY created_at, id LIMIT %s",
        (user_id, limit),
    )
    return await cur.fetchall()


async def store_stats(conn: AsyncConnection, user_id: int) -> StoreStats:
    cur = conn.cursor(row_factory=class_row(StoreStats))
    await cur.execute(
        f"""
        SELECT count(*) AS total,
               count(*) FILTER (WHERE {ACTIVE}) AS active,
               count(*) FILTER (WHERE deleted_at IS NOT NULL) AS soft_deleted,
               count(*) FILTER (WHERE deleted_at IS NULL AND expires_at <= now()) AS expired,
               avg(importance) FILTER (WHERE {ACTIVE}) AS avg_importance,
               min(created_at) AS oldest_created_at,
               max(created_at) AS newest_created_at
        FROM memories WHERE user_id = %s
        """,
        (user_id,),
    )
    stats = await cur.fetchone()
    assert stats is not None
    return stats


async def tag_counts(
    conn: AsyncConnection, user_id: int, *, include_deleted: bool, limit: int
) -> list[TagCount]:
    where = _unless_included(include_deleted)
    cur = conn.cursor(row_factory=class_row(TagCount))
    await cur.execute(
        f"SELECT t.tag, count(*) AS count FROM memories, unnest(tags) AS t(tag)"
        f" WHERE user_id = %s {where} GROUP BY t.tag ORDER BY count DESC, t.tag LIMIT %s",
        (user_id, limit),
    )
    return await cur.fetchall()


async def provider_counts(conn: AsyncConnection, user_id: int) -> list[ProviderCount]:
    cur = conn.cursor(row_factory=class_row(ProviderCount))
    await cur.execute(
        "SELECT coalesce(source_provider, '(none)') AS provider, count(*) AS count"
        " FROM memories WHERE user_id = %s GROUP BY 1 ORDER BY count DESC, provider",
        (user_id,),
    )
    return await cur.fetchall()
