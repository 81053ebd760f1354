"""SQL of backup and restore (``ownsona export`` / ``ownsona import``).

Every function takes a connection: the caller owns the transaction. Unlike
the tool queries these read and write across users (an operator's dump);
the use case in ``memory/backup.py`` scopes them.

Export reads in keyset pages (``id > last``) inside one REPEATABLE READ
snapshot, so a dump of any size streams in constant memory and is
consistent with its header's counts. Import writes with binary COPY, which
fires the per-user term-statistics triggers of migration 0002 like any
INSERT does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any, TypeVar

from psycopg import AsyncConnection, sql
from psycopg.abc import Params
from psycopg.rows import class_row, dict_row
from psycopg.types.json import Jsonb

from storage.sealing.user_keys import UserKeys

from . import outbox, sealed_relations, sealed_restore, terms
from .memory_sql import M_COLUMNS
from .rows import MemoryRow, copy_columns, memory_row
from .sealed_restore import SealedRestore

#: ``pg_advisory_xact_lock(class, object)`` key serialising concurrent imports
#: batch by batch, so two runs of one file never both insert the same row.
IMPORT_LOCK = (0x4F53_4F4E, 6)

T = TypeVar("T")


@dataclass(frozen=True)
class UserCount:
    username: str
    memories: int
    relations: int


@dataclass(frozen=True)
class ExportedMemory:
    """A memory as dumped: its row, its account's name and its learned context vector."""

    username: str
    row: MemoryRow
    #: A float32 vector in the space of ``row.embedding_model``, or None.
    context_centroid: Any


@dataclass(frozen=True)
class ExportedRelation:
    """An edge as dumped: the memory that owns it and its triple."""

    memory_id: int
    subject: str
    predicate: str
    object: str
    created_at: datetime


@dataclass(frozen=True)
class RestoredMemory:
    """A row to write back with its id, and the columns a row does not carry.

    ``embedding`` is freshly computed; ``context_centroid`` is the backup's.
    ``sealed``: set by :func:`seal_restored` (the row's text is then '', its tags
    and ``normalized_text`` keyed hashes).
    """

    row: MemoryRow
    normalized_text: str
    embedding: Any
    context_centroid: Any
    sealed: SealedRestore | None = None


@dataclass(frozen=True)
class RestoredRelation(ExportedRelation):
    """An edge to write back: as dumped, and the account its memory now belongs to."""

    user_id: int


@dataclass(frozen=True)
class PresentRow:
    """An existing row an imported one may be the same memory as."""

    id: int
    user_id: int
    created_at: datetime
    text_md5: str


async def _rows(
    conn: AsyncConnection, row_type: type[T], query: str | sql.SQL | sql.Composed, params: Params
) -> list[T]:
    """Every row ``query`` returns, as ``row_type``."""
    cur = conn.cursor(row_factory=class_row(row_type))
    await cur.execute(query, params)
    return await cur.fetchall()


async def _rows_for_ids(
    conn: AsyncConnection, row_type: type[T], query: str, ids: Sequence[int]
) -> list[T]:
    """The rows of ``query``, whose one parameter is the id array; no ids, no query."""
    return await _rows(conn, row_type, query, (list(ids),)) if ids else []


# --- export ----------------------------------------------------------------


async def begin_snapshot(conn: AsyncConnection) -> None:
    """Make the open transaction one read-only snapshot; must be its first statement."""
    await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")


async def user_counts(conn: AsyncConnection, username: str | None) -> list[UserCount]:
    """Every account (or the one named) with its memory and relation counts, by name."""
    return await _rows(
        conn,
        UserCount,
        """
        SELECT u.username, coalesce(m.n, 0)::int AS memories, coalesce(r.n, 0)::int AS relations
        FROM users u
        -- Counted per user, then joined (not a count per account row): the form Citus
        -- runs on every node at once.
        LEFT JOIN (SELECT user_id, count(*) AS n FROM memories GROUP BY user_id) m
            ON m.user_id = u.id
        LEFT JOIN (SELECT user_id, count(*) AS n FROM memory_relations GROUP BY user_id) r
            ON r.user_id = u.id
        WHERE %(username)s::text IS NULL OR u.username = %(username)s
        ORDER BY u.username
        """,
        {"username": username},
    )


async def max_memory_id(conn: AsyncConnection, username: str | None) -> int:
    cur = await conn.execute(
        """
        SELECT coalesce(max(m.id), 0) FROM memories m JOIN users u ON u.id = m.user_id
        WHERE %(username)s::text IS NULL OR u.username = %(username)s
        """,
        {"username": username},
    )
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def memory_page(
    conn: AsyncConnection, *, after_id: int, limit: int, username: str | None
) -> list[ExportedMemory]:
    """The next ``limit`` memories by id after ``after_id``, tombstones included."""
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(
        sql.SQL(
            """
        SELECT {}, u.username, m.context_centroid
        FROM memories m JOIN users u ON u.id = m.user_id
        WHERE m.id > %(after)s AND (%(username)s::text IS NULL OR u.username = %(username)s)
        ORDER BY m.id
        LIMIT %(limit)s
        """
            # With the sealed columns: a sealed row is opened, or refused, never exported as ''.
        ).format(sql.SQL(M_COLUMNS)),
        {"after": after_id, "limit": limit, "username": username},
    )
    return [
        ExportedMemory(d["username"], memory_row(d), d["context_centroid"])
        for d in await cur.fetchall()
    ]


async def relations_of(conn: AsyncConnection, memory_ids: Sequence[int]) -> list[ExportedRelation]:
    """The edges owned by these memories, by memory then insertion order."""
    if not memory_ids:
        return []
    cur = await conn.execute(
        "SELECT memory_id, subject, predicate, object, created_at, id, user_id,"
        " subject_sealed, predicate_sealed, object_sealed FROM memory_relations"
        " WHERE memory_id = ANY(%s) ORDER BY memory_id, id",
        (list(memory_ids),),
    )
    out = []
    # Sealed edges opened with their user's keys (the export's scope holds them), or refused.
    for memory_id, subject, predicate, obj, at, edge_id, user_id, *sealed in await cur.fetchall():
        s, p, o = sealed_relations.opened(
            user_id, edge_id, (subject, predicate, obj), (sealed[0], sealed[1], sealed[2])
        )
        out.append(ExportedRelation(memory_id, s, p, o, at))
    return out


# --- import ----------------------------------------------------------------


async def lock_import(conn: AsyncConnection) -> None:
    """Block until this transaction holds the import lock (released at commit)."""
    await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", IMPORT_LOCK)


async def advance_memory_ids(conn: AsyncConnection, at_least: int) -> None:
    """Move the id sequence past ``at_least`` so new rows never take a restored id.

    Writes running meanwhile then draw ids above every id in the file.
    """
    await conn.execute(
        """
        SELECT setval(seq, greatest(%s, coalesce(pg_sequence_last_value(seq), 0)))
        FROM (SELECT pg_get_serial_sequence('memories', 'id')::regclass AS seq) AS s
        """,
        (at_least,),
    )


async def next_memory_ids(conn: AsyncConnection, count: int) -> list[int]:
    """Fresh ids for restored rows whose own id is taken by another memory.

    Drawn as the column's default draws them (``ownsona_next_id``, migration
    0019), never by a bare ``nextval``: after a failover, the first draw on the
    new timeline moves the sequence past every id the old primary handed out.
    """
    if count <= 0:
        return []
    cur = await conn.execute(
        "SELECT ownsona_next_id(pg_get_serial_sequence('memories', 'id')::regclass)"
        " FROM generate_series(1, %s)",
        (count,),
    )
    return [int(r[0]) for r in await cur.fetchall()]


async def rows_by_id(conn: AsyncConnection, ids: Sequence[int]) -> list[PresentRow]:
    query = (
        "SELECT id, user_id, created_at, md5(normalized_text) AS text_md5 FROM memories"
        " WHERE id = ANY(%s)"
    )
    return await _rows_for_ids(conn, PresentRow, query, ids)


# The two probes below are LATERAL ... LIMIT 1, one index probe per key: the
# planner has no statistics for md5(normalized_text) and, for "IN (unnest)",
# chose a full scan (0.2-0.3 s per batch at 100k rows; see find_exact).


async def rows_by_birth(
    conn: AsyncConnection, keys: Sequence[tuple[int, datetime, str]]
) -> list[PresentRow]:
    """Rows with one of these ``(user_id, created_at, md5(normalized_text))``.

    A memory's identity beside its id: what finds a row an earlier import
    stored under a fresh id.
    """
    return await _present_rows(
        conn,
        keys,
        sql.SQL("%s::bigint[], %s::timestamptz[], %s::text[]"),
        sql.SQL("user_id, created_at, text_md5"),
        sql.SQL("created_at = k.created_at"),
    )


async def active_by_text(
    conn: AsyncConnection, keys: Sequence[tuple[int, str]]
) -> list[PresentRow]:
    """Active rows with one of these ``(user_id, md5(normalized_text))``.

    The probe of the partial unique index ``memories_active_normalized``: a
    restored active row matching one of these would violate it.
    """
    return await _present_rows(
        conn,
        keys,
        sql.SQL("%s::bigint[], %s::text[]"),
        sql.SQL("user_id, text_md5"),
        sql.SQL("deleted_at IS NULL"),
    )


async def _present_rows(
    conn: AsyncConnection,
    keys: Sequence[tuple[Any, ...]],
    arrays: sql.Composable,
    names: sql.Composable,
    condition: sql.Composable,
) -> list[PresentRow]:
    """Per key, a row of its user's with its text digest (both in ``names``) and ``condition``.

    ``arrays``: one typed array parameter per element of a key, unnested into
    the columns ``names`` of ``k``.
    """
    if not keys:
        return []
    return await _rows(
        conn,
        PresentRow,
        sql.SQL(
            """
        SELECT m.id, m.user_id, m.created_at, k.text_md5
        FROM unnest({arrays}) AS k({names})
        CROSS JOIN LATERAL (
            SELECT id, user_id, created_at FROM memories
            WHERE user_id = k.user_id AND {condition} AND md5(normalized_text) = k.text_md5
            ) AS m
        """  # no LIMIT 1 (Citus refuses it here): a second match is as good as the first
        ).format(arrays=arrays, names=names, condition=condition),
        [list(column) for column in zip(*keys, strict=True)],
    )


#: What a restore writes: every column of the row and its backed-up vectors, and
#: the two a row never carries.
_COPY_COLUMNS = (*copy_columns(), ("normalized_text", "text"), ("embedding", "vector"))
#: What a sealed restore writes besides (``sealed_search`` after the COPY: binary
#: COPY has no tsvector dumper).
_SEALED_COPY_COLUMNS = (
    *_COPY_COLUMNS,
    ("text_sealed", "bytea"),
    ("tags_sealed", "bytea"),
    ("text_chars", "int4"),
    ("metadata_sealed", "bytea"),
    ("forget_reason_sealed", "bytea"),
)


_ROW_FIELDS = frozenset(f.name for f in fields(MemoryRow))
_SEALED_FIELDS = frozenset(f.name for f in fields(SealedRestore))


def _copy_value(row: RestoredMemory, name: str, sql_type: str) -> Any:
    source: Any = row.row if name in _ROW_FIELDS else row
    if name in _SEALED_FIELDS:
        source = row.sealed
    value = getattr(source, name)
    return Jsonb(value) if sql_type == "jsonb" else value


async def seal_restored(
    conn: AsyncConnection, keys: Mapping[int, UserKeys], rows: Sequence[RestoredMemory]
) -> list[RestoredMemory]:
    """The rows sealed with their users' ``keys``, bound to their final ids, as
    ``storage.sealed_rows.seal_new`` seals a new row (lexemes: one round trip)."""
    if not rows:
        return []
    lexemes = await sealed_restore.lexemes(conn, [r.row.text for r in rows])
    out = []
    for restored, row_lexemes in zip(rows, lexemes, strict=True):
        row, normalized, sealed = sealed_restore.seal_row(
            keys[restored.row.user_id], restored.row, restored.normalized_text, row_lexemes
        )
        out.append(replace(restored, row=row, normalized_text=normalized, sealed=sealed))
    return out


async def copy_memories(conn: AsyncConnection, rows: Sequence[RestoredMemory]) -> None:
    """Write the rows with their own ids (binary COPY: one round trip per batch).

    Each user's term counts are locked before the COPY and then updated, and an
    extraction is owed for every row that is not forgotten (``storage.terms``,
    ``storage.outbox``): per user, so each statement stays on that user's shard.
    Rows from :func:`seal_restored` (all of the batch, or none) are written sealed.
    """
    if not rows:
        return
    sealed = rows[0].sealed is not None
    if any((row.sealed is not None) != sealed for row in rows):
        raise ValueError("a restored batch is sealed throughout or not at all")
    columns = _SEALED_COPY_COLUMNS if sealed else _COPY_COLUMNS
    by_user: dict[int, list[int]] = {}
    for row in rows:
        by_user.setdefault(row.row.user_id, []).append(row.row.id)
    async with terms.transaction(conn):
        async with conn.pipeline():
            await terms.lock_counts(conn, by_user)
        names = sql.SQL(", ").join(sql.Identifier(name) for name, _ in columns)
        cur = conn.cursor()
        statement = sql.SQL("COPY memories ({}) FROM STDIN WITH (FORMAT BINARY)").format(names)
        async with cur.copy(statement) as copy:
            copy.set_types([kind for _, kind in columns])
            for row in rows:
                await copy.write_row([_copy_value(row, name, kind) for name, kind in columns])
        if sealed:
            await _set_sealed_search(conn, rows)
        for user_id, ids in sorted(by_user.items()):
            counted = await conn.execute(
                sql.SQL("SELECT {} FROM memories WHERE user_id = %s AND id = ANY(%s)").format(
                    sql.SQL(terms.ROW_TERMS)
                ),
                (user_id, ids),
            )
            changes = terms.from_rows(await counted.fetchall())
            async with conn.pipeline():
                await outbox.owe_new(conn, user_id, ids)
                await terms.apply(conn, user_id, changes)


async def _set_sealed_search(conn: AsyncConnection, rows: Sequence[RestoredMemory]) -> None:
    """``sealed_search`` of the rows just copied (before their terms are counted).

    Keyed hashes are URL-safe base64 (no space): one space-joined string per row.
    """
    by_user: dict[int, list[RestoredMemory]] = {}
    for row in rows:
        by_user.setdefault(row.row.user_id, []).append(row)
    for user_id, user_rows in sorted(by_user.items()):
        await conn.execute(
            "UPDATE memories m SET sealed_search = array_to_tsvector("
            "string_to_array(u.terms, ' ')) FROM unnest(%s::bigint[], %s::text[]) AS u(id, terms)"
            " WHERE m.user_id = %s AND m.id = u.id",
            (
                [r.row.id for r in user_rows],
                [" ".join(r.sealed.sealed_terms if r.sealed else []) for r in user_rows],
                user_id,
            ),
        )


async def insert_relations(
    conn: AsyncConnection,
    rows: Sequence[RestoredRelation],
    keys: Mapping[int, UserKeys] | None = None,
) -> None:
    """Write restored edges of memories :func:`copy_memories` wrote in this transaction.

    Their memories then owe no extraction: these are their text's edges. With the
    users' ``keys`` (a sealed import) the phrases are sealed (``storage.sealed_restore``).
    """
    if not rows:
        return
    by_user: dict[int, list[int]] = {}
    for r in rows:
        by_user.setdefault(r.user_id, []).append(r.memory_id)
    for user_id, memory_ids in sorted(by_user.items()):
        await outbox.settle_restored(conn, user_id, memory_ids)
    if keys:
        by_edges: dict[int, list[RestoredRelation]] = {}
        for r in rows:
            by_edges.setdefault(r.user_id, []).append(r)
        for user_id, user_rows in sorted(by_edges.items()):
            await sealed_restore.insert_relations(
                conn,
                keys[user_id],
                [r.memory_id for r in user_rows],
                [(r.subject, r.predicate, r.object) for r in user_rows],
                [r.created_at for r in user_rows],
            )
        return
    await conn.execute(
        "INSERT INTO memory_relations (user_id, memory_id, subject, predicate, object, created_at)"
        " SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::text[], %s::text[], %s::text[],"
        " %s::timestamptz[])",
        (
            [r.user_id for r in rows],
            [r.memory_id for r in rows],
            [r.subject for r in rows],
            [r.predicate for r in rows],
            [r.object for r in rows],
            [r.created_at for r in rows],
        ),
    )


async def imported_extractions_due(conn: AsyncConnection, memory_ids: Sequence[int]) -> None:
    """Make the relation extractions these imported memories owe due now (``relation_outbox``).

    The memories inserted here that came without edges are owed one; the
    outbox sweep sends due entries at once instead of after the grace it
    gives a write's own relay (an import has none). By id: the outbox's
    primary key, not a scan for this transaction's entries.
    """
    if memory_ids:
        await conn.execute(
            "UPDATE relation_outbox SET due_at = now() WHERE memory_id = ANY(%s)",
            (list(memory_ids),),
        )


async def remap_replaced_by(
    conn: AsyncConnection, memory_ids: Sequence[int], new_ids: Mapping[int, int]
) -> int:
    """Point ``replaced_by_id`` of these rows at the new ids of renumbered rows."""
    if not memory_ids or not new_ids:
        return 0
    cur = await conn.execute(
        """
        UPDATE memories m SET replaced_by_id = r.new_id
        FROM unnest(%s::bigint[], %s::bigint[]) AS r(old_id, new_id)
        WHERE m.id = ANY(%s) AND m.replaced_by_id = r.old_id
        """,
        (list(new_ids.keys()), list(new_ids.values()), list(memory_ids)),
    )
    return cur.rowcount
