"""SQL of learned ranking: salience, use counts and context centroids (SUPPLEMENT §4).

Feedback never touches ``updated_at``: learning is not an edit, and
``updated_at`` is one of recall's tie-breaks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row


@dataclass(frozen=True)
class Feedback:
    """One row's new learned state."""

    id: int
    salience: float
    #: Added to ``use_count``.
    use_count_increment: int
    #: The new context centroid (a unit float32 vector), or None to keep the current one.
    centroid: Any
    #: Added to ``context_count``.
    context_count_increment: int


@dataclass(frozen=True)
class LearnedState:
    id: int
    salience: float
    use_count: int
    context_count: int


async def centroids(
    conn: AsyncConnection, user_id: int, memory_ids: Sequence[int]
) -> dict[int, Any]:
    """The current context centroid of each of the rows that has one."""
    if not memory_ids:
        return {}
    cur = await conn.execute(
        "SELECT id, context_centroid FROM memories"
        " WHERE user_id = %s AND id = ANY(%s) AND context_centroid IS NOT NULL",
        (user_id, list(memory_ids)),
    )
    # pgvector's loader gives a Vector; the maths wants a numpy array.
    return {
        int(r[0]): r[1].to_numpy() if hasattr(r[1], "to_numpy") else r[1]
        for r in await cur.fetchall()
    }


async def apply_feedback(
    conn: AsyncConnection, user_id: int, updates: Sequence[Feedback]
) -> dict[int, LearnedState]:
    """Write every row's new learned state in one statement; return the states by id."""
    if not updates:
        return {}
    cur = conn.cursor(row_factory=class_row(LearnedState))
    await cur.execute(
        """
        UPDATE memories m
        SET salience = u.salience,
            use_count = m.use_count + u.uses,
            context_centroid = coalesce(u.centroid, m.context_centroid),
            context_count = m.context_count + u.contexts
        FROM unnest(%s::bigint[], %s::float8[], %s::int[], %s::vector[], %s::int[])
             AS u(id, salience, uses, centroid, contexts)
        WHERE m.id = u.id AND m.user_id = %s
        RETURNING m.id, m.salience, m.use_count, m.context_count
        """,
        (
            [u.id for u in updates],
            [u.salience for u in updates],
            [u.use_count_increment for u in updates],
            [u.centroid for u in updates],
            [u.context_count_increment for u in updates],
            user_id,
        ),
    )
    return {row.id: row for row in await cur.fetchall()}
