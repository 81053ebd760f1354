"""``ownsona seal``: a store's plain memory rows rewritten sealed, a batch at a time, beside writers.

Each batch is one transaction of one user: the user's term lock first
(``storage.terms.lock_counts``, as every writer takes it), then up to ``limit`` of
the user's plain rows (``text_sealed IS NULL``, tombstones included: they hold
text too) locked and rewritten sealed (``storage.sealed_rows``), their term
statistics moved from the lexemes to the keyed terms in the same transaction.
A write arriving meanwhile waits for the lock or goes first; a sealing process
writes sealed rows itself, so the plain rows only ever decrease. Nothing is
remembered between runs: a run stopped anywhere resumes by picking up the plain
rows left.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from psycopg import AsyncConnection, sql

from storage.sealing.user_keys import TEXT, UserKeys

from . import sealed_relations, terms
from .sealed_rows import TEXT_SEARCH_CONFIG, seal_metadata


async def plain_rows_per_user(conn: AsyncConnection) -> dict[int, int]:
    """Users with plain memory rows, and how many each."""
    cur = await conn.execute(
        "SELECT user_id, count(*) FROM memories WHERE text_sealed IS NULL"
        " GROUP BY user_id ORDER BY user_id"
    )
    return {int(r[0]): int(r[1]) for r in await cur.fetchall()}


_SEAL_ROW = sql.SQL(
    "UPDATE memories SET text = '', text_sealed = %(text_sealed)s, tags = %(tags)s,"
    " tags_sealed = %(tags_sealed)s, normalized_text = %(normalized_text)s,"
    " sealed_search = array_to_tsvector(%(sealed_search)s::text[]), text_chars = %(chars)s,"
    " metadata = '{{}}', metadata_sealed = %(metadata_sealed)s,"
    " forget_reason = NULL, forget_reason_sealed = coalesce(%(reason_sealed)s, forget_reason_sealed)"
    " WHERE user_id = %(user_id)s AND id = %(id)s AND text_sealed IS NULL RETURNING {}"
).format(sql.SQL(terms.CHANGED_TERMS))


_PLAIN_ROWS = (
    "SELECT id, text, normalized_text, tags,"
    " tsvector_to_array(to_tsvector(%s::regconfig, text)), metadata, forget_reason"
    " FROM memories WHERE user_id = %s AND text_sealed IS NULL"
)


async def seal_batch(conn: AsyncConnection, keys: UserKeys, *, limit: int) -> int:
    """Seal up to ``limit`` of the user's plain rows (inside a transaction); how many."""
    rows = await _lock_plain_rows(conn, keys, " ORDER BY id LIMIT %s FOR UPDATE", limit)
    return await _seal_rows(conn, keys, rows)


async def seal_row(conn: AsyncConnection, keys: UserKeys, memory_id: int) -> bool:
    """Seal one row if it is still plain (inside a transaction); whether it was.

    For a sealing writer about to change a plain row's text or tags
    (``memory_writes.update_fields``): sealed first whole, the row never holds a
    sealed text beside plain tags or metadata (which ``ownsona seal``, picking rows
    by ``text_sealed IS NULL``, would then never move), nor keyed tags beside a
    plain text (which it would seal as if they were the tags).
    """
    rows = await _lock_plain_rows(conn, keys, " AND id = %s FOR UPDATE", memory_id)
    return await _seal_rows(conn, keys, rows) > 0


async def _lock_plain_rows(
    conn: AsyncConnection, keys: UserKeys, tail: str, value: int
) -> list[tuple[Any, ...]]:
    """The user's term counts locked first, then the plain rows ``tail`` picks, locked."""
    async with conn.pipeline():
        await terms.lock_counts(conn, [keys.user_id])
        cur = await conn.execute(_PLAIN_ROWS + tail, (TEXT_SEARCH_CONFIG, keys.user_id, value))
        return await cur.fetchall()


async def _seal_rows(conn: AsyncConnection, keys: UserKeys, rows: list[tuple[Any, ...]]) -> int:
    """Rewrite ``rows`` (locked, from :data:`_PLAIN_ROWS`) sealed, their term statistics
    moved from the lexemes to the keyed terms; how many."""
    if not rows:
        return 0
    user_id = keys.user_id
    changes = terms.TermChanges()
    for row_id, text, normalized, tags, lexemes, metadata, reason in rows:
        cur = await conn.execute(
            _SEAL_ROW,
            {
                "user_id": user_id,
                "id": row_id,
                "text_sealed": keys.seal(text, row_id, "text"),
                "tags": keys.keyed_tags(tags),
                "tags_sealed": keys.seal(json.dumps(list(tags)), row_id, "tags"),
                "normalized_text": keys.keyed(TEXT, normalized),
                "sealed_search": sorted(set(keys.keyed_terms(lexemes))),
                "chars": len(text),
                "metadata_sealed": seal_metadata(keys, row_id, metadata),
                "reason_sealed": None
                if reason is None
                else keys.seal(reason, row_id, "forget_reason"),
            },
        )
        for lost, gained in await cur.fetchall():
            changes.add_update(lost, gained)
    async with conn.pipeline():
        await terms.apply(conn, user_id, changes)
    return len(rows)


async def users_with_plain_edges(conn: AsyncConnection) -> list[int]:
    """Users with plain relation edges (``subject_sealed IS NULL``)."""
    cur = await conn.execute(
        "SELECT DISTINCT user_id FROM memory_relations WHERE subject_sealed IS NULL"
    )
    return sorted(int(r[0]) for r in await cur.fetchall())


_SEAL_EDGE = (
    "UPDATE memory_relations SET subject = %(subject)s, predicate = %(predicate)s,"
    " object = %(object)s, subject_sealed = %(subject_sealed)s,"
    " predicate_sealed = %(predicate_sealed)s, object_sealed = %(object_sealed)s,"
    " predicate_prefixes = %(predicate_prefixes)s"
    " WHERE user_id = %(user_id)s AND id = %(id)s AND subject_sealed IS NULL"
)


async def seal_edges_batch(conn: AsyncConnection, keys: UserKeys, *, limit: int) -> int:
    """Seal up to ``limit`` of the user's plain relation edges (inside a transaction);
    how many. An edge is rewritten whole, in place: no statistics hang on it."""
    user_id = keys.user_id
    cur = await conn.execute(
        "SELECT id, subject, predicate, object FROM memory_relations"
        " WHERE user_id = %s AND subject_sealed IS NULL ORDER BY id LIMIT %s FOR UPDATE",
        (user_id, limit),
    )
    rows = await cur.fetchall()
    async with conn.pipeline():
        for edge_id, subject, predicate, obj in rows:
            edge = sealed_relations.seal_edge(keys, int(edge_id), (subject, predicate, obj))
            await conn.execute(_SEAL_EDGE, {"user_id": user_id, **asdict(edge)})
    return len(rows)


async def sealed_users(conn: AsyncConnection, username: str | None) -> list[int]:
    """Users (every one, or the one named) with sealed memory rows or relation edges (an
    edge extracted sealed from a memory not moved yet; a reason sealed on a plain row)."""
    cur = await conn.execute(
        "SELECT m.user_id FROM memories m JOIN users u ON u.id = m.user_id"
        " WHERE (m.text_sealed IS NOT NULL OR m.forget_reason_sealed IS NOT NULL"
        "        OR m.metadata_sealed IS NOT NULL)"
        "   AND (%(u)s::text IS NULL OR u.username = %(u)s)"
        " UNION"
        " SELECT r.user_id FROM memory_relations r JOIN users u ON u.id = r.user_id"
        " WHERE r.subject_sealed IS NOT NULL AND (%(u)s::text IS NULL OR u.username = %(u)s)",
        {"u": username},
    )
    return sorted(int(r[0]) for r in await cur.fetchall())
