"""SQL of the cleanup scans (find_near_duplicates, find_conflicts; SUPPLEMENT §5).

Every function takes a connection and is scoped by ``user_id``. Only active
rows (not soft-deleted, not expired) take part, as probes and as neighbours.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from psycopg import AsyncConnection
from psycopg.rows import class_row

from .memory_sql import ACTIVE, COLUMNS
from .rows import MemoryRow

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
        f"SELECT count(*) FROM memories WHERE user_id = %s AND {ACTIVE}", (user_id,)
    )
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def active_vectors(conn: AsyncConnection, user_id: int) -> ActiveVectors:
    """Every active row's id, tags and embedding (binary transfer: ~2 s per 100k rows).

    Read in chunks through a server-side cursor into one preallocated array,
    so the vectors are held once (100k x 384 floats: 150 MB), not three times.
    """
    async with conn.transaction():
        # One snapshot for the count and the rows.
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        total = await active_count(conn, user_id)
        ids: list[int] = []
        tags: list[list[str]] = []
        vectors: Any = None
        cur = conn.cursor(name="scan_vectors", binary=True)
        await cur.execute(
            f"SELECT id, tags, embedding FROM memories WHERE user_id = %s AND {ACTIVE} ORDER BY id",
            (user_id,),
        )
        while rows := await cur.fetchmany(_FETCH_CHUNK):
            if vectors is None:
                vectors = np.empty((total, len(rows[0][2].to_numpy())), dtype=np.float32)
            for row in rows:
                vectors[len(ids)] = row[2].to_numpy()
                ids.append(int(row[0]))
                tags.append(list(row[1]))
        await cur.close()
    if vectors is None:
        return ActiveVectors([], [], np.zeros((0, 0), dtype=np.float32))
    return ActiveVectors(ids, tags, vectors)


async def active_ids(conn: AsyncConnection, user_id: int, *, tagged_only: bool) -> list[int]:
    """The user's active row ids, ascending; with ``tagged_only`` only rows with a tag."""
    tagged = "AND cardinality(tags) > 0" if tagged_only else ""
    cur = await conn.execute(
        f"SELECT id FROM memories WHERE user_id = %s AND {ACTIVE} {tagged} ORDER BY id",
        (user_id,),
    )
    return [int(r[0]) for r in await cur.fetchall()]


async def set_scan_search_width(conn: AsyncConnection) -> None:
    """Narrow the HNSW search to a top-10's needs for the rest of this transaction."""
    await conn.execute(f"SET LOCAL hnsw.ef_search = {int(SCAN_EF_SEARCH)}")


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
    tag_gate = "AND n.tags && p.tags" if shared_tag else ""
    cur = await conn.execute(
        f"""
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
          AND n.similarity >= %(min)s {tag_gate}
        """,
        {"user_id": user_id, "ids": list(probe_ids), "k": k, "min": min_similarity},
    )
    return [(int(a), int(b), float(s)) for a, b, s in await cur.fetchall()]


async def rows_by_ids(
    conn: AsyncConnection, user_id: int, ids: Sequence[int]
) -> dict[int, MemoryRow]:
    """The user's active rows among ``ids``."""
    if not ids:
        return {}
    cur = conn.cursor(row_factory=class_row(MemoryRow))
    await cur.execute(
        f"SELECT {COLUMNS} FROM memories WHERE user_id = %s AND id = ANY(%s) AND {ACTIVE}",
        (user_id, list(ids)),
    )
    return {row.id: row for row in await cur.fetchall()}
