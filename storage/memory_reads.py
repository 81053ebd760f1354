"""Reads of ``memories`` by id and by the listing filters, and the store's counts.

Every function takes a connection: the caller owns the transaction. Every
query is scoped by ``user_id`` (SUPPLEMENT §1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.rows import class_row

from storage.sealing.scope import keys_for

from . import sealed_rows, terms
from .memory_sql import ACTIVE, COLUMNS
from .rows import MemoryFilter, MemoryRow, ProviderCount, StoreStats, TagCount, memory_rows

_COLUMNS = sql.SQL(COLUMNS)
_ACTIVE = sql.SQL(ACTIVE)


async def get_memory(conn: AsyncConnection, user_id: int, memory_id: int) -> MemoryRow | None:
    """One row of the user's, soft-deleted or not."""
    cur = conn.cursor(row_factory=memory_rows)
    await cur.execute(
        sql.SQL("SELECT {} FROM memories WHERE id = %s AND user_id = %s").format(_COLUMNS),
        (memory_id, user_id),
    )
    return await cur.fetchone()


async def get_memories_for_update(
    conn: AsyncConnection, user_id: int, memory_ids: Sequence[int]
) -> dict[int, MemoryRow]:
    """The user's rows among ``memory_ids``, locked for this transaction.

    The user's term counts are locked first (``storage.terms``: what a write of
    these rows may change, and the order that keeps two writers of one user
    from deadlocking); sent in the same round trip.
    """
    if not memory_ids:
        return {}
    cur = conn.cursor(row_factory=memory_rows)
    async with terms.transaction(conn):
        async with conn.pipeline():
            await terms.lock_counts(conn, [user_id])
            await cur.execute(
                sql.SQL(
                    "SELECT {} FROM memories WHERE user_id = %s AND id = ANY(%s) ORDER BY id FOR UPDATE"
                ).format(_COLUMNS),
                (user_id, list(memory_ids)),
            )
            rows = await cur.fetchall()
        return {row.id: row for row in rows}


def _filter_clause(user_id: int, f: MemoryFilter) -> tuple[sql.Composable, dict[str, Any]]:
    clauses: list[sql.Composable] = [] if f.include_deleted else [_ACTIVE]
    params: dict[str, Any] = {}
    if f.untagged_only:
        clauses.append(sql.SQL("cardinality(tags) = 0"))
    if f.min_chars is not None:
        clauses.append(sql.SQL("coalesce(text_chars, char_length(text)) >= %(min_chars)s"))
        params["min_chars"] = f.min_chars
    if f.max_chars is not None:
        clauses.append(sql.SQL("coalesce(text_chars, char_length(text)) <= %(max_chars)s"))
        params["max_chars"] = f.max_chars
    if f.not_confirmed_since is not None:
        clauses.append(sql.SQL("(last_confirmed_at IS NULL OR last_confirmed_at < %(ncs)s)"))
        params["ncs"] = f.not_confirmed_since
    if f.tags:
        clauses.append(sql.SQL("tags && %(tags)s"))
        params["tags"] = sealed_rows.tag_filter(user_id, f.tags)
    if f.source_provider is not None:
        clauses.append(sql.SQL("source_provider = %(source_provider)s"))
        params["source_provider"] = f.source_provider
    if not clauses:
        return sql.SQL(""), params
    return sql.SQL(" AND ") + sql.SQL(" AND ").join(clauses), params


async def list_memories(
    conn: AsyncConnection, user_id: int, f: MemoryFilter, *, limit: int, offset: int
) -> list[MemoryRow]:
    where, params = _filter_clause(user_id, f)
    cur = conn.cursor(row_factory=memory_rows)
    await cur.execute(
        sql.SQL(
            "SELECT {} FROM memories WHERE user_id = %(user_id)s {}"
            " ORDER BY created_at DESC, id DESC LIMIT %(limit)s OFFSET %(offset)s"
        ).format(_COLUMNS, where),
        {**params, "user_id": user_id, "limit": limit, "offset": offset},
    )
    return await cur.fetchall()


async def count_memories(conn: AsyncConnection, user_id: int, f: MemoryFilter) -> int:
    where, params = _filter_clause(user_id, f)
    cur = await conn.execute(
        sql.SQL("SELECT count(*) FROM memories WHERE user_id = %(user_id)s {}").format(where),
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
    """Active rows containing ``fragment``, case-insensitively (trigram-indexed).

    Sealed rows cannot be matched in SQL: they are read newest first, opened and
    matched here (``str.casefold``, as close to ILIKE as Python has), until
    ``limit`` rows match, among the plain rows ILIKE finds.
    """
    cur = conn.cursor(row_factory=memory_rows)
    await cur.execute(
        sql.SQL(
            "SELECT {} FROM memories WHERE user_id = %s AND {}"
            " AND (text ILIKE %s OR text_sealed IS NOT NULL)"
            " ORDER BY created_at DESC, id DESC"
        ).format(_COLUMNS, _ACTIVE),
        (user_id, _like_pattern(fragment)),
    )
    wanted = fragment.casefold()
    found: list[MemoryRow] = []
    async for row in cur:
        if wanted in row.text.casefold():
            found.append(row)
            if len(found) >= limit:
                break
    return found


def _unless_included(include_deleted: bool) -> sql.Composable:
    """The active-row condition to add to a WHERE, unless soft-deleted rows are wanted too."""
    return sql.SQL("") if include_deleted else sql.SQL("AND ") + _ACTIVE


async def export_rows(
    conn: AsyncConnection, user_id: int, *, include_deleted: bool, limit: int
) -> list[MemoryRow]:
    where = _unless_included(include_deleted)
    cur = conn.cursor(row_factory=memory_rows)
    await cur.execute(
        sql.SQL(
            "SELECT {} FROM memories WHERE user_id = %s {} ORDER BY created_at, id LIMIT %s"
        ).format(_COLUMNS, where),
        (user_id, limit),
    )
    return await cur.fetchall()


async def store_stats(conn: AsyncConnection, user_id: int, *, top_tags: int) -> StoreStats:
    """The store's counts, its ``top_tags`` most used active tags and its providers.

    One pass over the user's rows (an index-only scan of ``memories_user_counts``):
    the rows are first counted per tag set and provider, so the per-tag and
    per-provider counts and the totals are sums over those few groups, not three
    scans of the store.
    """
    cur = await conn.execute(
        sql.SQL(
            """
        WITH groups AS (
            SELECT tags, coalesce(source_provider, '(none)') AS provider,
                count(*) AS n,
                count(*) FILTER (WHERE {active}) AS active,
                count(*) FILTER (WHERE deleted_at IS NOT NULL) AS soft_deleted,
                count(*) FILTER (WHERE deleted_at IS NULL AND expires_at <= now()) AS expired,
                sum(importance) FILTER (WHERE {active}) AS importance_sum,
                min(created_at) AS oldest, max(created_at) AS newest
            FROM memories WHERE user_id = %(user_id)s
            GROUP BY tags, provider
        ), top_tags AS (
            SELECT t.tag, sum(g.active)::bigint AS count
            FROM groups g, unnest(g.tags) AS t(tag)
            WHERE g.active > 0
            GROUP BY t.tag ORDER BY count DESC, t.tag LIMIT %(top_tags)s
        ), providers AS (
            SELECT provider, sum(n)::bigint AS count FROM groups GROUP BY provider
        )
        SELECT coalesce(sum(n), 0)::bigint, coalesce(sum(active), 0)::bigint,
            coalesce(sum(soft_deleted), 0)::bigint, coalesce(sum(expired), 0)::bigint,
            sum(importance_sum) / nullif(sum(active), 0)::float8,
            min(oldest), max(newest),
            (SELECT coalesce(array_agg(tag ORDER BY count DESC, tag), '{{}}') FROM top_tags),
            (SELECT coalesce(array_agg(count ORDER BY count DESC, tag), '{{}}') FROM top_tags),
            (SELECT coalesce(array_agg(provider ORDER BY count DESC, provider), '{{}}')
             FROM providers),
            (SELECT coalesce(array_agg(count ORDER BY count DESC, provider), '{{}}')
             FROM providers)
        FROM groups
        """
        ).format(active=_ACTIVE),
        {"user_id": user_id, "top_tags": top_tags},
    )
    row = await cur.fetchone()
    assert row is not None
    total, active, soft_deleted, expired, avg_importance, oldest, newest = row[:7]
    tag_names, tag_counts, providers, provider_counts = row[7:]
    tag_names = await _tag_names(conn, user_id, tag_names)
    return StoreStats(
        total=total,
        active=active,
        soft_deleted=soft_deleted,
        expired=expired,
        avg_importance=avg_importance,
        oldest_created_at=oldest,
        newest_created_at=newest,
        top_tags=[TagCount(t, c) for t, c in zip(tag_names, tag_counts, strict=True)],
        by_provider=[ProviderCount(p, c) for p, c in zip(providers, provider_counts, strict=True)],
    )


async def tag_counts(
    conn: AsyncConnection, user_id: int, *, include_deleted: bool, limit: int
) -> list[TagCount]:
    where = _unless_included(include_deleted)
    cur = conn.cursor(row_factory=class_row(TagCount))
    # unnest in the select list (one ProjectSet over an index-only scan of
    # memories_user_counts) costs about half what a lateral unnest per row does.
    await cur.execute(
        sql.SQL(
            "SELECT tag, count(*) AS count FROM"
            " (SELECT unnest(tags) AS tag FROM memories WHERE user_id = %s {}) AS t"
            " GROUP BY tag ORDER BY count DESC, tag LIMIT %s"
        ).format(where),
        (user_id, limit),
    )
    counted = await cur.fetchall()
    names = await _tag_names(conn, user_id, [t.tag for t in counted])
    # Sealed ties were ordered by hash: ordered again by name, as for plain tags.
    named = [TagCount(n, t.count) for n, t in zip(names, counted, strict=True)]
    return sorted(named, key=lambda t: (-t.count, t.tag))


async def _tag_names(conn: AsyncConnection, user_id: int, tags: list[str]) -> list[str]:
    """The tags as the user wrote them: a sealed row's tags are keyed hashes, named by
    opening one row that carries each (its ``tags_sealed`` in the order of ``tags``)."""
    if not tags or keys_for(user_id) is None:
        return tags  # no keys in scope: no sealed row can be named
    cur = await conn.execute(
        "SELECT DISTINCT ON (t.tag) t.tag, m.id, m.tags, m.tags_sealed"
        " FROM unnest(%s::text[]) AS t(tag)"
        " CROSS JOIN LATERAL (SELECT id, tags, tags_sealed FROM memories"
        " WHERE user_id = %s AND tags_sealed IS NOT NULL AND tags @> ARRAY[t.tag] LIMIT 1) AS m",
        (tags, user_id),
    )
    names: dict[str, str] = {}
    for tag, row_id, hashed, sealed in await cur.fetchall():
        opened_tags = sealed_rows.open_tags(user_id, row_id, hashed, sealed)
        names[tag] = opened_tags[list(hashed).index(tag)]
    return [names.get(t, t) for t in tags]
