"""Writes of ``memories`` and the lookups a write makes first (exact and near copies).

Every function takes a connection: the caller owns the transaction. Every
query is scoped by ``user_id`` (SUPPLEMENT §1).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import fields
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.adapt import PyFormat
from psycopg.rows import dict_row

from storage.sealing.scope import sealing_writes

from . import outbox, sealed_rows, sealing_move, terms
from .memory_sql import LARGE_USER, M_ACTIVE, M_COLUMNS, SMALL_USER
from .rows import MemoryRow, Neighbour, NewMemory, memory_row

#: HNSW search breadth for write-time near-duplicate probes (k <= 5).
_WRITE_EF_SEARCH = 40


# --- write-time lookups ----------------------------------------------------


async def find_exact(
    conn: AsyncConnection, user_id: int, normalized_texts: Sequence[str]
) -> dict[str, MemoryRow]:
    """Undeleted rows (expired included) whose normalized text is one of these."""
    if not normalized_texts:
        return {}
    # One unique-index probe per digest. The planner has no statistics for the
    # md5 expression of a partial index and chose a full scan for "= ANY"
    # (0.14 s for 200 texts against 100k rows); LATERAL ... LIMIT 1 is 2 ms.
    # Sealed: the stored normalized_text is its keyed hash (storage.sealed_rows).
    stored = sealed_rows.normalized_keys(user_id, normalized_texts)
    digests = [hashlib.md5(t.encode("utf-8")).hexdigest() for t in stored]
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(
        sql.SQL(
            "SELECT {}, m.normalized_text FROM unnest(%s::text[]) AS d(digest)"
            " CROSS JOIN LATERAL (SELECT * FROM memories"
            " WHERE user_id = %s AND deleted_at IS NULL AND md5(normalized_text) = d.digest"
            " LIMIT 1) AS m"
        ).format(sql.SQL(M_COLUMNS)),
        (digests, user_id),
    )
    return {
        stored[d["normalized_text"]]: memory_row(d)
        for d in await cur.fetchall()
        if d["normalized_text"] in stored  # an md5 collision is not a duplicate
    }


def _per_probe(candidates: sql.Composable, *, gathered: sql.Composable) -> sql.Composed:
    """The query running ``candidates`` once per probe vector, keeping scores >= ``%(min)s``.

    ``candidates``: a subquery over the probe vector ``q.v`` giving id, text,
    tags, score and the tombstone columns, best first, ``LIMIT %(k)s``;
    ``gathered``: a WITH clause it reads.
    """
    return sql.SQL(
        """
        {gathered}
        SELECT (q.i - 1)::int AS probe, n.id, n.text, n.tags, n.score,
               n.forget_reason, n.replaced_by_id, n.deleted_at, n.text_sealed, n.tags_sealed,
               n.forget_reason_sealed
        FROM unnest(%(vs)b::vector[]) WITH ORDINALITY AS q(v, i)
        CROSS JOIN LATERAL ({candidates}) n
        WHERE n.score >= %(min)s
        ORDER BY q.i, n.score DESC
        """
    ).format(gathered=gathered, candidates=candidates)


async def _neighbours(
    conn: AsyncConnection,
    query: sql.Composed,
    user_id: int,
    embeddings: Sequence[Any],
    k: int,
    min_score: float,
) -> list[Neighbour]:
    cur = conn.cursor(row_factory=dict_row)
    # %(vs)b: the probe vectors go in binary; as text, 200 of them cost ~80 ms to
    # format and parse (measured), binary ~1 ms.
    await cur.execute(
        query,
        {"vs": list(embeddings), "user_id": user_id, "k": k, "min": min_score},
        prepare=False,  # a plan for this user's size (memory_sql.USER_ROWS)
    )
    out = []
    for d in await cur.fetchall():
        sealed_text, sealed_tags = d.pop("text_sealed"), d.pop("tags_sealed")
        d["text"] = sealed_rows.open_text(user_id, d["id"], d["text"], sealed_text)
        d["tags"] = sealed_rows.open_tags(user_id, d["id"], d["tags"], sealed_tags)
        d["forget_reason"] = sealed_rows.open_reason(
            user_id, d["id"], d["forget_reason"], d.pop("forget_reason_sealed")
        )
        out.append(Neighbour(**d))
    return out


#: A large user's probes each walk the HNSW index; a small user's rows are
#: gathered once and every probe is compared with all of them (exact), as the
#: recall side does (``memory_sql.nearest_ids``). MATERIALIZED: read once for the
#: whole batch, and never for a large user (its one-time filter is false).
_NEAREST_ACTIVE = _per_probe(
    sql.SQL(
        """
    (SELECT m.id, m.text, m.tags, 1 - (m.embedding <=> q.v) AS score,
            NULL::text AS forget_reason, NULL::bigint AS replaced_by_id,
            NULL::timestamptz AS deleted_at, m.text_sealed, m.tags_sealed,
            NULL::bytea AS forget_reason_sealed
     FROM memories m
     WHERE m.user_id = %(user_id)s AND {active} AND {large_user}
     ORDER BY m.embedding <=> q.v
     LIMIT %(k)s)
    UNION ALL
    (SELECT mine.id, mine.text, mine.tags, 1 - (mine.embedding <=> q.v) AS score,
            NULL::text, NULL::bigint, NULL::timestamptz, mine.text_sealed, mine.tags_sealed,
            NULL::bytea
     FROM mine
     ORDER BY mine.embedding <=> q.v
     LIMIT %(k)s)
    """
    ).format(active=sql.SQL(M_ACTIVE), large_user=LARGE_USER),
    gathered=sql.SQL(
        """
    WITH mine AS MATERIALIZED (
        SELECT m.id, m.text, m.tags, m.embedding, m.text_sealed, m.tags_sealed FROM memories m
        WHERE m.user_id = %(user_id)s AND {active} AND {small_user}
    )
    """
    ).format(active=sql.SQL(M_ACTIVE), small_user=SMALL_USER),
)


async def nearest_active(
    conn: AsyncConnection, user_id: int, embeddings: Sequence[Any], *, k: int, min_score: float
) -> list[Neighbour]:
    """For each probe vector, its top-``k`` active rows at cosine >= ``min_score``.

    Must run inside a transaction: it narrows the HNSW search for its duration.
    """
    if not embeddings:
        return []
    # A top-5 check at cosine >= 0.9 needs far less search breadth than
    # recall's candidate lists; this took a 200-item batch's probes from
    # 0.21 s to 0.08 s (measured on a 2k-row store).
    await conn.execute(
        sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(_WRITE_EF_SEARCH))
    )
    return await _neighbours(conn, _NEAREST_ACTIVE, user_id, embeddings, k, min_score)


_NEAREST_TOMBSTONES = _per_probe(
    sql.SQL(
        """
    SELECT d.id, d.text, d.tags, 1 - (d.embedding <=> q.v) AS score,
           d.forget_reason, d.replaced_by_id, d.deleted_at, d.text_sealed, d.tags_sealed,
           d.forget_reason_sealed
    FROM dead d
    ORDER BY d.embedding <=> q.v
    LIMIT %(k)s
    """
    ),
    gathered=sql.SQL(
        """
    WITH dead AS MATERIALIZED (
        SELECT id, text, tags, embedding, forget_reason, replaced_by_id, deleted_at,
               text_sealed, tags_sealed, forget_reason_sealed
        FROM memories WHERE user_id = %(user_id)s AND deleted_at IS NOT NULL
    )
    """
    ),
)


async def nearest_tombstones(
    conn: AsyncConnection, user_id: int, embeddings: Sequence[Any], *, k: int, min_score: float
) -> list[Neighbour]:
    """For each probe vector, its top-``k`` soft-deleted rows at cosine >= ``min_score``.

    Tombstones are few next to active rows, so this is an exact scan over the
    user's deleted rows, gathered once (MATERIALIZED keeps the planner off the
    HNSW index, which would wade through active rows to find them).
    """
    if not embeddings:
        return []
    return await _neighbours(conn, _NEAREST_TOMBSTONES, user_id, embeddings, k, min_score)


# --- writes ----------------------------------------------------------------


#: The columns an insert writes: the owner and every field of a ``NewMemory``.
_NEW_FIELDS = tuple(f.name for f in fields(NewMemory))
#: The placeholders of one inserted row. The vector goes in binary: as text, 384
#: floats cost ~0.25 ms to format and parse each (a batch of 200: ~50 ms),
#: binary ~1/50th of that.
_PLACEHOLDER = {"embedding": "%b", "last_confirmed_at": "coalesce(%s, now())"}
_INSERTED = ("user_id", *_NEW_FIELDS)
#: Who wrote the row: not a field of the memory any tool shows, so not in ``NewMemory``.
_WRITER_FIELDS = ("written_by_client", "written_by_token")
_NEW_ROW = sql.SQL("({})").format(
    sql.SQL(", ").join(sql.SQL(_PLACEHOLDER.get(n, "%s")) for n in (*_INSERTED, *_WRITER_FIELDS))
)


#: NewMemory fields a sealed row stores differently (storage.sealed_rows.SealedColumns).
_SEALED_FIELDS = frozenset({"text", "normalized_text", "tags"})
#: What a sealed row adds: its id (drawn first), sealed values, keyed terms, length.
_SEALED_EXTRA = ("id", "text_sealed", "tags_sealed", "sealed_terms", "text_chars")
_SEALED_EXTRA_COLUMNS = ("id", "text_sealed", "tags_sealed", "sealed_search", "text_chars")
_SEALED_ROW = sql.SQL("({})").format(
    sql.SQL(", ").join(
        [
            *(sql.SQL(_PLACEHOLDER.get(n, "%s")) for n in (*_INSERTED, *_WRITER_FIELDS)),
            *(sql.SQL("%s"),) * 3,
            sql.SQL("array_to_tsvector(%s::text[])"),
            sql.SQL("%s"),
        ]
    )
)


async def insert_memories(
    conn: AsyncConnection,
    user_id: int,
    items: Sequence[NewMemory],
    *,
    written_by_client: str | None = None,
    written_by_token: str | None = None,
) -> list[tuple[int, datetime]]:
    """Insert rows in order; return (id, created_at) of each, in the same order.

    ``written_by_*``: the app the write speaks for, recorded on every row (migration
    0014); only this insert sets it, so no later write changes who wrote a row.
    """
    if not items:
        return []
    keys = sealing_writes(user_id)
    params: list[Any] = []
    if keys is None:
        for item in items:
            params.append(user_id)
            params.extend(getattr(item, n) for n in _NEW_FIELDS)
            params.extend((written_by_client, written_by_token))
        query = sql.SQL("INSERT INTO memories ({}) VALUES {} RETURNING id, created_at, {}").format(
            sql.SQL(", ").join(sql.Identifier(n) for n in (*_INSERTED, *_WRITER_FIELDS)),
            sql.SQL(", ").join([_NEW_ROW] * len(items)),
            sql.SQL(terms.ROW_TERMS),
        )
    else:
        # Sealed (docs/at-rest.md): ids drawn first, each value bound to its row. The
        # user's term lock first, as every writer takes it: drawing an id may lock
        # store_meta (ownsona_next_id, 0019), which after a writer holding the term
        # lock and waiting for store_meta would deadlock.
        async with terms.transaction(conn):
            await terms.lock_counts(conn, [user_id])
        sealed = await sealed_rows.seal_new(
            conn,
            keys,
            [i.text for i in items],
            [i.normalized_text for i in items],
            [i.tags for i in items],
        )
        for item, columns in zip(items, sealed, strict=True):
            params.append(user_id)
            params.extend(
                getattr(columns, n) if n in _SEALED_FIELDS else getattr(item, n)
                for n in _NEW_FIELDS
            )
            params.extend((written_by_client, written_by_token))
            params.extend(getattr(columns, n) for n in _SEALED_EXTRA)
        query = sql.SQL("INSERT INTO memories ({}) VALUES {} RETURNING id, created_at, {}").format(
            sql.SQL(", ").join(
                sql.Identifier(n) for n in (*_INSERTED, *_WRITER_FIELDS, *_SEALED_EXTRA_COLUMNS)
            ),
            sql.SQL(", ").join([_SEALED_ROW] * len(items)),
            sql.SQL(terms.ROW_TERMS),
        )
    async with terms.transaction(conn):
        async with conn.pipeline():  # the lock and the insert: one round trip
            await terms.lock_counts(conn, [user_id])
            cur = await conn.execute(query, params)
            rows = await cur.fetchall()
        ids = [int(r[0]) for r in rows]
        async with conn.pipeline():  # what it owes: one more
            await outbox.owe_new(conn, user_id, ids)
            await terms.apply(conn, user_id, terms.from_rows(rows))
        return [(i, r[1]) for i, r in zip(ids, rows, strict=True)]


async def soft_delete(
    conn: AsyncConnection,
    user_id: int,
    memory_ids: Sequence[int],
    *,
    reason: str | None,
    replaced_by_id: int | None,
    keep_existing_metadata: bool = False,
) -> None:
    """Mark rows forgotten; on rows already forgotten, rewrite the tombstone metadata.

    With ``keep_existing_metadata`` a None reason or replacement leaves the
    stored value alone instead of clearing it.
    """
    if not memory_ids:
        return
    ids = sorted(memory_ids)
    # Sealed (migration 0024): the reason bound to each row, the plain column NULL. One
    # value per row, each written by its own UPDATE in the same pipeline (one round trip):
    # picking it inside the main UPDATE by the row's place in the ids
    # (``(v::bytea[])[array_position(ids, id)]``) crashes a Citus 14.0.1 coordinator.
    sealed = sealed_rows.seal_reasons(user_id, ids, reason)
    plain_reason = None if sealed is not None else reason
    # least(), not coalesce(): the same time (least ignores a NULL), and Citus refuses a
    # function inside COALESCE or CASE in an UPDATE.
    if keep_existing_metadata and reason is None:
        reason_sets = "forget_reason = forget_reason, forget_reason_sealed = forget_reason_sealed"
    elif sealed is not None and reason is not None:  # the sealed values follow, row by row
        reason_sets = "forget_reason = NULL, forget_reason_sealed = forget_reason_sealed"
    elif sealed is not None:
        reason_sets = "forget_reason = NULL, forget_reason_sealed = NULL"
    else:
        reason_sets = "forget_reason = %(reason)s, forget_reason_sealed = NULL"
    replaced = (
        "coalesce(%(replaced)s, replaced_by_id)" if keep_existing_metadata else "%(replaced)s"
    )
    query = sql.SQL(
        "UPDATE memories SET deleted_at = least(deleted_at, now()), " + reason_sets + ","
        " replaced_by_id = " + replaced + ", updated_at = now()"
        " WHERE user_id = %(user_id)s AND id = ANY(%(ids)s) RETURNING {}"
    )
    params = {
        "reason": plain_reason,
        "replaced": replaced_by_id,
        "user_id": user_id,
        "ids": ids,
    }
    async with terms.transaction(conn):
        async with conn.pipeline():
            await terms.lock_counts(conn, [user_id])
            cur = await conn.execute(query.format(sql.SQL(terms.CHANGED_TERMS)), params)
            if sealed is not None and reason is not None:
                await conn.cursor().executemany(
                    "UPDATE memories SET forget_reason_sealed = %s WHERE user_id = %s AND id = %s",
                    [(value, user_id, row) for row, value in zip(ids, sealed, strict=True)],
                )
            changes = _changes(await cur.fetchall())
        if changes:  # else nothing to send (a tombstone's metadata rewritten)
            async with conn.pipeline():
                await terms.apply(conn, user_id, changes)


async def hard_delete(conn: AsyncConnection, user_id: int, memory_id: int) -> bool:
    """Remove the row and what derives from it (relations cascade; receipts naming it)."""
    async with terms.transaction(conn):
        async with conn.pipeline():
            await terms.lock_counts(conn, [user_id])
            cur = await conn.execute(
                sql.SQL("DELETE FROM memories WHERE user_id = %s AND id = %s RETURNING {}").format(
                    sql.SQL(terms.ROW_TERMS)
                ),
                (user_id, memory_id),
            )
            gone = await cur.fetchall()
        changes = terms.TermChanges()
        for row in gone:
            changes.lose(row[0])
        async with conn.pipeline():
            await terms.apply(conn, user_id, changes)
            await conn.execute(
                "DELETE FROM write_receipts WHERE user_id = %s"
                " AND jsonb_path_exists(result, '$.** ? (@.id == $m || @.memory_id == $m)',"
                " jsonb_build_object('m', %s::bigint))",
                (user_id, memory_id),
            )
        return bool(gone)


def _changes(rows: Sequence[tuple[Any, ...]]) -> terms.TermChanges:
    """The statistics' changes of an update returning :data:`terms.CHANGED_TERMS` last."""
    changes = terms.TermChanges()
    for row in rows:
        changes.add_update(row[-2], row[-1])
    return changes


async def set_salience(
    conn: AsyncConnection,
    user_id: int,
    updates: Sequence[tuple[int, float, int]],
) -> None:
    """Write (id, salience, use_count increment) for each row."""
    if not updates:
        return
    await conn.execute(
        "UPDATE memories m SET salience = u.salience, use_count = m.use_count + u.inc"
        " FROM unnest(%s::bigint[], %s::float8[], %s::int[]) AS u(id, salience, inc)"
        " WHERE m.id = u.id AND m.user_id = %s",
        (
            [u[0] for u in updates],
            [u[1] for u in updates],
            [u[2] for u in updates],
            user_id,
        ),
    )


async def confirm(conn: AsyncConnection, user_id: int, memory_id: int, salience: float) -> datetime:
    cur = await conn.execute(
        "UPDATE memories SET last_confirmed_at = now(), salience = %s, use_count = use_count + 1"
        " WHERE user_id = %s AND id = %s RETURNING last_confirmed_at",
        (salience, user_id, memory_id),
    )
    row = await cur.fetchone()
    assert row is not None
    confirmed_at: datetime = row[0]
    return confirmed_at


_UPDATABLE = frozenset(
    {
        "text",
        "normalized_text",
        "embedding",
        "embedding_provider",
        "embedding_model",
        "tags",
        "importance",
        "expires_at",
        "last_confirmed_at",
        "occurred_at",
        "valid_from",
        "valid_to",
        "occurred_at_parsed",
        "keep",
    }
)


async def update_fields(
    conn: AsyncConnection, user_id: int, memory_id: int, changes: dict[str, Any]
) -> None:
    """Set the given columns (a fixed whitelist) and ``updated_at``."""
    unknown = set(changes) - _UPDATABLE
    if unknown:
        raise ValueError(f"not updatable: {sorted(unknown)}")
    keys = sealing_writes(user_id)
    sealing = keys is not None and bool(_SEALED_FIELDS & set(changes))
    if keys is not None and sealing:
        changes = await sealed_rows.seal_changes(conn, keys, memory_id, changes)
    assignments: list[sql.Composable] = [
        sql.SQL("{} = {}").format(
            sql.Identifier(name),
            sql.SQL("array_to_tsvector({}::text[])").format(sql.Placeholder(name))
            if name == "sealed_search"
            # Vectors travel in binary (see insert_memories).
            else sql.Placeholder(name, PyFormat.BINARY if name == "embedding" else PyFormat.AUTO),
        )
        for name in changes
    ]
    assignments.append(sql.SQL("updated_at = now()"))
    query = sql.SQL(
        "UPDATE memories SET {} WHERE user_id = %(user_id)s AND id = %(id)s"
        " RETURNING (old.text IS DISTINCT FROM new.text"
        " OR old.text_sealed IS DISTINCT FROM new.text_sealed) AND new.deleted_at IS NULL, {}"
    ).format(sql.SQL(", ").join(assignments), sql.SQL(terms.CHANGED_TERMS))
    async with terms.transaction(conn):
        if keys is not None and sealing:
            # A row not yet moved by ``ownsona seal`` is sealed whole first: changing
            # only some of its columns sealed would leave it half plain (sealing_move).
            await sealing_move.seal_row(conn, keys, memory_id)
        async with conn.pipeline():
            await terms.lock_counts(conn, [user_id])
            cur = await conn.execute(query, {**changes, "user_id": user_id, "id": memory_id})
            rows = await cur.fetchall()
        counted, text_changed = _changes(rows), any(row[0] for row in rows)
        if counted or text_changed:  # else nothing to send (tags, dates ...)
            async with conn.pipeline():
                await terms.apply(conn, user_id, counted)
                if text_changed:
                    # New words: the extraction starts over (0005's text trigger).
                    await outbox.owe_again(conn, user_id, memory_id)
