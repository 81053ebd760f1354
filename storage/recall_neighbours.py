"""Recall's session hop: the memories stored next to a match in the same session.

A question's evidence is often spread over memories stored together: the turns
around the one that looks like the question (an answer follows its question in
a conversation), the facts an assistant saved in the same chat. For each seed
(a match recall is about to return), the ``window`` active memories stored just
before and just after it with the same ``session_id``, in id order (the order
they were stored in), with their cosine to the query. One statement for all
seeds, through ``memories_user_session`` (migration 0018).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row

from .memory_sql import M_COLUMNS
from .rows import ScoredMemoryRow, memory_row

_ACTIVE_N = "n.deleted_at IS NULL AND (n.expires_at IS NULL OR n.expires_at > now())"


@dataclass(frozen=True)
class Neighbour:
    """A memory stored next to ``seed`` in its session, scored against the query."""

    scored: ScoredMemoryRow
    seed: int


async def session_neighbours(
    conn: AsyncConnection,
    user_id: int,
    seeds: Sequence[int],
    query_embedding: Any,
    *,
    window: int,
    tags: Sequence[str] = (),
) -> list[Neighbour]:
    """Up to ``window`` memories on each side of each seed in its session (active, with
    ``tags`` when given), nearest seed first; a memory next to two seeds comes once."""
    if not seeds or window < 1:
        return []
    tag_filter = "AND n.tags && %(tags)s" if tags else ""
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(
        f"""
        SELECT DISTINCT ON (m.id) {M_COLUMNS}, near.seed,
               1 - (m.embedding <=> %(q)b) AS cosine,
               CASE WHEN m.context_centroid IS NULL THEN 0
                    ELSE greatest(0, 1 - (m.context_centroid <=> %(q)b)) END AS context_match
        FROM memories s
        CROSS JOIN LATERAL (
            (SELECT n.id, s.id AS seed FROM memories n
             WHERE n.user_id = s.user_id AND n.session_id = s.session_id AND n.id < s.id
               AND {_ACTIVE_N} {tag_filter}
             ORDER BY n.id DESC LIMIT %(window)s)
            UNION ALL
            (SELECT n.id, s.id AS seed FROM memories n
             WHERE n.user_id = s.user_id AND n.session_id = s.session_id AND n.id > s.id
               AND {_ACTIVE_N} {tag_filter}
             ORDER BY n.id LIMIT %(window)s)
        ) near
        JOIN memories m ON m.id = near.id
        WHERE s.id = ANY(%(seeds)s) AND s.user_id = %(user_id)s AND s.session_id IS NOT NULL
        ORDER BY m.id, array_position(%(seeds)s, near.seed)
        """,
        {
            "q": query_embedding,
            "user_id": user_id,
            "seeds": list(seeds),
            "window": window,
            "tags": list(tags),
        },
    )
    return [
        Neighbour(
            ScoredMemoryRow(memory_row(d), float(d["cosine"]), float(d["context_match"])),
            int(d["seed"]),
        )
        for d in await cur.fetchall()
    ]
