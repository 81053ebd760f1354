"""Where memories came from: the app that wrote each, the rows one replaced (migration 0014),
the newer memories that downweighted one (migration 0016).

The console's memory page and apps page read these; no tool does, so no tool
output carries the writer. Every function takes a connection; every query is
scoped by ``user_id`` (SUPPLEMENT §1).
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import AsyncConnection, sql
from psycopg.rows import class_row

from .memory_sql import ACTIVE


@dataclass(frozen=True)
class WrittenBy:
    """The app recorded on a row; both None: not recorded."""

    client_id: str | None
    token_jti: str | None


@dataclass(frozen=True)
class WrittenCount:
    """How many of one user's rows an app wrote."""

    client_id: str | None
    token_jti: str | None
    #: Every row it wrote that is still stored, forgotten ones included.
    total: int
    #: Of those, the ones recall may still show (not forgotten, not expired).
    active: int


async def written_by(conn: AsyncConnection, user_id: int, memory_id: int) -> WrittenBy | None:
    """Who wrote the user's memory ``memory_id``; None when there is no such memory."""
    async with conn.cursor(row_factory=class_row(WrittenBy)) as cur:
        await cur.execute(
            "SELECT written_by_client AS client_id, written_by_token AS token_jti"
            " FROM memories WHERE user_id = %s AND id = %s",
            (user_id, memory_id),
        )
        return await cur.fetchone()


async def replaced_ids(conn: AsyncConnection, user_id: int, memory_id: int) -> list[int]:
    """The user's memories whose ``replaced_by_id`` is ``memory_id``, by id."""
    cur = await conn.execute(
        "SELECT id FROM memories WHERE user_id = %s AND replaced_by_id = %s ORDER BY id",
        (user_id, memory_id),
    )
    return [int(r[0]) for r in await cur.fetchall()]


async def written_counts(conn: AsyncConnection, user_id: int) -> list[WrittenCount]:
    """Per recorded writer, the user's rows it wrote (an index-only scan of
    ``memories_user_writer``; rows whose writer is not recorded come as one None group)."""
    async with conn.cursor(row_factory=class_row(WrittenCount)) as cur:
        await cur.execute(
            sql.SQL(
                """
            SELECT written_by_client AS client_id, written_by_token AS token_jti,
                count(*)::int AS total, (count(*) FILTER (WHERE {}))::int AS active
            FROM memories WHERE user_id = %s
            GROUP BY written_by_client, written_by_token
            """
            ).format(sql.SQL(ACTIVE)),
            (user_id,),
        )
        return await cur.fetchall()


async def record_downweights(
    conn: AsyncConnection, user_id: int, pairs: list[tuple[int, int]]
) -> None:
    """Record ``(memory id, downweighted by id)`` pairs; a repeated pair is kept once."""
    if not pairs:
        return
    await conn.execute(
        "INSERT INTO memory_downweights (user_id, memory_id, by_memory_id)"
        " SELECT %s, p.m, p.b FROM unnest(%s::bigint[], %s::bigint[]) AS p(m, b)"
        " ON CONFLICT DO NOTHING",
        (user_id, [p[0] for p in pairs], [p[1] for p in pairs]),
    )


async def downweighted_by(conn: AsyncConnection, user_id: int, memory_id: int) -> list[int]:
    """The user's memories that downweighted ``memory_id``, by id."""
    cur = await conn.execute(
        "SELECT by_memory_id FROM memory_downweights WHERE user_id = %s AND memory_id = %s"
        " ORDER BY by_memory_id",
        (user_id, memory_id),
    )
    return [int(r[0]) for r in await cur.fetchall()]


async def downweighted(conn: AsyncConnection, user_id: int, memory_id: int) -> list[int]:
    """The user's memories that ``memory_id`` downweighted, by id."""
    cur = await conn.execute(
        "SELECT memory_id FROM memory_downweights WHERE user_id = %s AND by_memory_id = %s"
        " ORDER BY memory_id",
        (user_id, memory_id),
    )
    return [int(r[0]) for r in await cur.fetchall()]
