"""SQL of the cleanup scans (find_near_duplicates, find_conflicts; SUPPLEMENT §5).

Every function takes a connection and is scoped by ``user_id``. Only active
rows (not soft-deleted, not expired) take part, as probes and as neighbours.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from psycopg import AsyncConnection, sql
from psycopg.rows import dict_row

from . import sealed_relations, sealed_rows
from .memory_sql import ACTIVE, COLUMNS, M_ACTIVE
from .rows import MemoryRow, memory_rows

_ACTIVE = sql.SQL(ACTIVE)
_M_ACTIVE = sql.SQL(M_ACTIVE)

#: Candidates the HNSW scan keeps per probe. Enough for a top-10 (pgvector's
#: default is 40); the pool's 200, sized for recall's 4 x limit, would make a
#: scan several times slower for no better top-10.
SCAN_EF_SEARCH = 40
#: Rows per round trip when reading every active vector.
_FETCH_CHUNK = 5000


@dataclass(frozen=True)
class ActiveVectors:
    """The user's active rows, in id order: ids, tag lists, and a (rows, dims) float32 array."""

    ids: list[int]
    tags: list[list[str]]
    vectors: Any


async def active_count(conn: AsyncConnection, user_id: int) -> int:
    cur = await conn.execute(
        sql.SQL("SELECT count(*) FROM memories WHERE user_id = %s AND {}").format(_ACTIVE),
        (user_id,),
    )
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def newest_update(conn: AsyncConnection, user_id: int) -> datetime | None:
    """The newest ``updated_at`` of the user's rows, forgotten ones too.

    Every insert, edit and forget moves it; confirm and feedback do not. One
    entry of ``memories_user_updated`` (migration 0012): microseconds at any size,
    where a count of the user's rows reads every index entry (15-30 ms at 100k).
    """
    cur = await conn.execute("SELECT max(updated_at) FROM memories WHERE user_id = %s", (user_id,))
    row = await cur.fetchone()
    return row[0] if row else None


async def active_vectors(conn: AsyncConnection, user_id: int) -> ActiveVectors:
    """Every active row's id, tags and embedding (binary transfer: ~2 s per 100k rows).

    Read in chunks (keyset pages by id, one snapshot) into one preallocated array,
    so the vectors are held once (100k x 384 floats: 150 MB), not three times. Pages,
    not a server-side cursor: a scan cancelled mid-read (a shutdown) leaves nothing
    open, where a cursor whose close the cancel interrupted was left to the garbage
    collector (a ResourceWarning in the tests).
    """
    async with conn.transaction():
        # One snapshot for the count and the rows.
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        total = await active_count(conn, user_id)
        ids: list[int] = []
        tags: list[list[str]] = []
        vectors: Any = None
        after = 0
        while True:
            cur = await conn.execute(
                sql.SQL(
                    "SELECT id, tags, embedding FROM memories WHERE user_id = %s AND {}"
                    " AND id > %s ORDER BY id LIMIT %s"
                ).format(_ACTIVE),
                (user_id, after, _FETCH_CHUNK),
                binary=True,
            )
            rows = await cur.fetchall()
            if not rows:
                break
            if vectors is None:
                vectors = np.empty((total, len(rows[0][2].to_numpy())), dtype=np.float32)
            for row in rows:
                vectors[len(ids)] = row[2].to_numpy()
                ids.append(int(row[0]))
                tags.append(list(row[1]))
            after = ids[-1]
    if vectors is None:
        return ActiveVectors([], [], np.zeros((0, 0), dtype=np.float32))
    return ActiveVectors(ids, tags, vectors)


async def active_ids(conn: AsyncConnection, user_id: int, *, tagged_only: bool) -> list[int]:
    """The user's active row ids, ascending; with ``tagged_only`` only rows with a tag."""
    tagged = sql.SQL("AND cardinality(tags) > 0" if tagged_only else "")
    cur = await conn.execute(
        sql.SQL("SELECT id FROM memories WHERE user_id = %s AND {} {} ORDER BY id").format(
            _ACTIVE, tagged
        ),
        (user_id,),
    )
    return [int(r[0]) for r in await cur.fetchall()]


async def set_scan_search_width(conn: AsyncConnection) -> None:
    """Narrow the HNSW search to a top-10's needs for the rest of this transaction."""
    await conn.execute(
        sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(int(SCAN_EF_SEARCH)))
    )


async def neighbour_pairs(
    conn: AsyncConnection,
    user_id: int,
    probe_ids: Sequence[int],
    *,
    k: int,
    min_similarity: float,
    shared_tag: bool,
) -> list[tuple[int, int, float]]:
    """``(probe id, neighbour id, cosine)`` for each probe's top-``k`` active neighbours.

    One statement for the whole batch of probes: each probe's own embedding
    drives an HNSW index scan (a LATERAL join), so no vector leaves the
    database. Only pairs at ``min_similarity`` or above come back; with
    ``shared_tag`` only pairs whose rows share at least one tag.
    """
    if not probe_ids:
        return []
    tag_gate = sql.SQL("AND n.tags && p.tags" if shared_tag else "")
    cur = await conn.execute(
        sql.SQL(
            """
        SELECT p.id, n.id, n.similarity
        FROM memories p
        CROSS JOIN LATERAL (
            SELECT m.id, m.tags, 1 - (m.embedding <=> p.embedding) AS similarity
            FROM memories m
            WHERE m.user_id = %(user_id)s AND m.id <> p.id
              AND m.deleted_at IS NULL AND (m.expires_at IS NULL OR m.expires_at > now())
            ORDER BY m.embedding <=> p.embedding
            LIMIT %(k)s
        ) n
        WHERE p.id = ANY(%(ids)s) AND p.user_id = %(user_id)s
          AND n.similarity >= %(min)s {}
        """
        ).format(tag_gate),
        {"user_id": user_id, "ids": list(probe_ids), "k": k, "min": min_similarity},
    )
    return [(int(a), int(b), float(s)) for a, b, s in await cur.fetchall()]


async def rows_by_ids(
    conn: AsyncConnection, user_id: int, ids: Sequence[int]
) -> dict[int, MemoryRow]:
    """The user's active rows among ``ids``."""
    if not ids:
        return {}
    cur = conn.cursor(row_factory=memory_rows)
    await cur.execute(
        sql.SQL("SELECT {} FROM memories WHERE user_id = %s AND id = ANY(%s) AND {}").format(
            sql.SQL(COLUMNS), _ACTIVE
        ),
        (user_id, list(ids)),
    )
    return {row.id: row for row in await cur.fetchall()}


@dataclass(frozen=True)
class FactRow:
    """One extracted edge of an active memory, with the memory's tags (find_conflicts).

    ``tags`` as written (a sealed row's opened), as :class:`OwedText`'s: the tag gate
    compares the two, so a keyed hash must never meet a tag.
    """

    memory_id: int
    tags: list[str]
    subject: str
    predicate: str
    object: str


@dataclass(frozen=True)
class OwedText:
    """An active memory whose relation extraction has not run yet, with its text and tags."""

    memory_id: int
    tags: list[str]
    text: str


def like_escape(pattern: str) -> str:
    """A LIKE pattern whose only wildcard is a trailing ``%`` the caller wrote."""
    body, wild = (pattern[:-1], "%") if pattern.endswith("%") else (pattern, "")
    return body.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + wild


def _m_tagged(tagged_only: bool) -> sql.Composable:
    """The condition keeping only memories ``m`` with a tag, when ``tagged_only``."""
    return sql.SQL("AND cardinality(m.tags) > 0" if tagged_only else "")


async def functional_edges(
    conn: AsyncConnection, user_id: int, patterns: Sequence[str], *, tagged_only: bool
) -> list[FactRow]:
    """Edges whose predicate matches one of ``patterns`` (LIKE, a trailing ``%`` only), of
    active memories that owe no extraction (an owed memory's edges are missing or stale).

    With ``tagged_only`` only memories with at least one tag.
    """
    keyed = sealed_relations.predicate_patterns(user_id, patterns)
    cur = conn.cursor()
    await cur.execute(
        sql.SQL(
            """
        SELECT r.memory_id, m.tags, m.tags_sealed, r.subject, r.predicate, r.object,
               r.id, r.subject_sealed, r.predicate_sealed, r.object_sealed
        FROM memory_relations r JOIN memories m ON m.id = r.memory_id
        WHERE r.user_id = %(user_id)s AND m.user_id = %(user_id)s AND {} {}
          AND {}
          AND NOT EXISTS (SELECT 1 FROM relation_outbox o
                          WHERE o.user_id = %(user_id)s AND o.memory_id = m.id)
        ORDER BY r.memory_id, r.id
        """
        ).format(_M_ACTIVE, _m_tagged(tagged_only), sealed_relations.PREDICATE_MATCHES),
        {
            "user_id": user_id,
            "patterns": [like_escape(p) for p in patterns],
            "sealed_exact": keyed.exact,
            "sealed_prefixes": keyed.prefixes,
        },
    )
    opened: dict[int, list[str]] = {}  # a memory's tags opened once, however many edges
    out = []
    rows = await cur.fetchall()
    for memory_id, tags, tags_sealed, subject, predicate, obj, edge_id, *sealed in rows:
        if memory_id not in opened:
            opened[memory_id] = sealed_rows.open_tags(user_id, memory_id, tags, tags_sealed)
        s, p, o = sealed_relations.opened(
            user_id, edge_id, (subject, predicate, obj), (sealed[0], sealed[1], sealed[2])
        )
        out.append(FactRow(memory_id, opened[memory_id], s, p, o))
    return out


async def owed_texts(
    conn: AsyncConnection, user_id: int, *, tagged_only: bool, limit: int
) -> list[OwedText]:
    """Active memories still owed a relation extraction, newest first, at most ``limit``."""
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(
        sql.SQL(
            """
        SELECT m.id AS memory_id, m.tags, m.text, m.text_sealed, m.tags_sealed
        FROM relation_outbox o JOIN memories m ON m.id = o.memory_id
        WHERE o.user_id = %(user_id)s AND m.user_id = %(user_id)s AND {} {}
        ORDER BY m.id DESC
        LIMIT %(limit)s
        """
        ).format(_M_ACTIVE, _m_tagged(tagged_only)),
        {"user_id": user_id, "limit": limit},
    )
    return [
        OwedText(
            memory_id=d["memory_id"],
            tags=sealed_rows.open_tags(user_id, d["memory_id"], d["tags"], d["tags_sealed"]),
            text=sealed_rows.open_text(user_id, d["memory_id"], d["text"], d["text_sealed"]),
        )
        for d in await cur.fetchall()
    ]


async def pair_similarities(
    conn: AsyncConnection, user_id: int, pairs: Sequence[tuple[int, int]]
) -> list[tuple[int, int, float]]:
    """``(id, id, cosine)`` of each pair whose two rows are the user's and active."""
    if not pairs:
        return []
    cur = await conn.execute(
        """
        SELECT p.a, p.b, 1 - (a.embedding <=> b.embedding)
        FROM unnest(%(a)s::bigint[], %(b)s::bigint[]) AS p(a, b)
        JOIN memories a ON a.id = p.a AND a.user_id = %(user_id)s
        JOIN memories b ON b.id = p.b AND b.user_id = %(user_id)s
        WHERE a.deleted_at IS NULL AND (a.expires_at IS NULL OR a.expires_at > now())
          AND b.deleted_at IS NULL AND (b.expires_at IS NULL OR b.expires_at > now())
        """,
        {"user_id": user_id, "a": [p[0] for p in pairs], "b": [p[1] for p in pairs]},
    )
    return [(int(a), int(b), float(s)) for a, b, s in await cur.fetchall()]
