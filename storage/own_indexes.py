"""A large user's own HNSW index: a partial index over their rows alone.

The table-wide HNSW index serves every user through a filtered scan. For a user
holding a small share of a large table that scan steps over everyone else's rows
near the query: the big tenant of the tenants benchmark (100,000 rows of 1.1M)
got recall@10 0.92 against exact search and 1.7x its lone-user latency
(BENCHMARKS.md, "issue 16, many tenants"). A partial index ``WHERE user_id = N``
is a graph over that user's rows only, as if they were alone: PostgreSQL uses it
for a statement whose ``user_id = %(user_id)s`` is planned with the value (the
search statements run unprepared, or with a large user's id written in:
``memory_sql``), because it is the smaller of the two indexes that can order by
distance.

Only a few users qualify (:data:`OWN_INDEX_MIN_ROWS` rows, less than
1/:data:`OWN_INDEX_MAX_SHARE` of the table): every partial index costs each
insert a predicate test and each plan a predicate proof, so thousands of small
ones would slow everyone. Small users need none: they are searched exactly
(``memory_sql.SMALL_USER``). A lone user, or one holding most of the table, is
served as well by the table-wide index.

Built with ``CREATE INDEX CONCURRENTLY`` (reads and writes go on meanwhile; an
interrupted build leaves an invalid index, dropped and built again). Dropped
when the user falls under half the row bound or is gone. Re-embedding drops the
column and with it these indexes; they are built again for the new one.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg_pool import AsyncConnectionPool

from .advisory import wait_for_advisory_lock

__all__ = [
    "OWN_INDEX_MAX_SHARE",
    "OWN_INDEX_MIN_ROWS",
    "OwnIndexPlan",
    "build_own_index",
    "drop_own_index",
    "hold_own_index_lock",
    "maintenance_connection",
    "own_index_name",
    "own_index_plan",
    "try_lock_own_indexes",
]

#: Users with at least this many rows (not soft-deleted) get their own index...
OWN_INDEX_MIN_ROWS = 20_000
#: ...while they hold less than 1/this of the table (of their shard, on Citus).
OWN_INDEX_MAX_SHARE = 2
#: ``maintenance_work_mem`` of a build: the graph of 100,000 rows of 384 floats fits.
BUILD_MEMORY = "256MB"

_NAME = re.compile(r"memories_embedding_user_(\d+)_hnsw")
#: ``pg_try_advisory_lock(class, object)`` key: one process at a time keeps the indexes.
OWN_INDEX_LOCK = (0x4F53_4F4E, 7)


@asynccontextmanager
async def maintenance_connection(pool: AsyncConnectionPool) -> AsyncIterator[AsyncConnection]:
    """A connection of its own to ``pool``'s database (autocommit), closed afterwards.

    A build holds its connection for minutes: taken from the pool it would leave
    the requests one fewer (none, with ``DB_POOL_MAX=1``), and a session lock a
    cancelled pass failed to release would go back into the pool with it.
    Closing the connection always releases the lock.
    """
    conninfo: Any = pool.conninfo
    if callable(conninfo):  # the process's DatabaseAddress: resolved once, remembered
        conninfo = await conninfo()
    conn = await AsyncConnection.connect(str(conninfo), autocommit=True)
    try:
        yield conn
    finally:
        await conn.close()


@asynccontextmanager
async def hold_own_index_lock(conn: AsyncConnection) -> AsyncIterator[None]:
    """Wait for any own-index build to end and keep new ones off until the block ends.

    For work that takes a lock on ``memories`` that a running ``CREATE INDEX
    CONCURRENTLY`` would make it wait for, while every request queued behind
    it (re-embedding's swap): it waits here instead, holding nothing (not even a
    snapshot: storage.advisory).
    """
    await wait_for_advisory_lock(conn, *OWN_INDEX_LOCK)
    try:
        yield
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s, %s)", OWN_INDEX_LOCK)


async def try_lock_own_indexes(conn: AsyncConnection) -> bool:
    """Take the session lock that lets one process build and drop own indexes; False if held."""
    cur = await conn.execute("SELECT pg_try_advisory_lock(%s, %s)", OWN_INDEX_LOCK)
    row = await cur.fetchone()
    return bool(row and row[0])


def own_index_name(user_id: int) -> str:
    """The name of ``user_id``'s own index."""
    return f"memories_embedding_user_{int(user_id)}_hnsw"


@dataclass(frozen=True)
class OwnIndexPlan:
    """What to change: users whose index to build, index names to drop."""

    build: list[int] = field(default_factory=list)
    drop: list[str] = field(default_factory=list)


async def own_index_plan(
    conn: AsyncConnection,
    *,
    min_rows: int = OWN_INDEX_MIN_ROWS,
    max_share: int = OWN_INDEX_MAX_SHARE,
) -> OwnIndexPlan:
    """Which users qualify and have no valid index yet, which indexes are no longer needed.

    Row counts come from ``memory_term_totals`` (kept by the writes, ``storage.terms``).
    A user is weighed against what their HNSW scan walks, ``ownsona_memories_rows``
    (migration 0026): the table's ``reltuples`` on one node, their shard's on Citus,
    read on the worker holding it (the coordinator's estimate of a distributed table
    is 0, and nobody would qualify). -1 before the first ANALYZE: nobody qualifies
    until the table (the shard) has been analysed once. On Citus this statement runs
    on every shard of ``memory_term_totals`` (docs/scaling.md, "Which statements fan
    out"): a maintenance pass, never on a request's path.
    """
    cur = await conn.execute(
        """
        SELECT t.user_id FROM memory_term_totals t
        WHERE t.docs >= %(min_rows)s
          AND t.docs * %(max_share)s < ownsona_memories_rows(t.user_id)
        ORDER BY t.docs DESC
        """,
        {"min_rows": min_rows, "max_share": max_share},
    )
    qualifying = [int(r[0]) for r in await cur.fetchall()]
    cur = await conn.execute(
        """
        SELECT c.relname, i.indisvalid, coalesce(t.docs, 0)
        FROM pg_index i
        JOIN pg_class c ON c.oid = i.indexrelid
        LEFT JOIN memory_term_totals t
          ON t.user_id::text = substring(c.relname FROM 'memories_embedding_user_(\\d+)_hnsw')
        WHERE i.indrelid = 'memories'::regclass
          AND c.relname ~ '^memories_embedding_user_\\d+_hnsw$'
        """
    )
    existing = {str(name): (bool(valid), int(docs)) for name, valid, docs in await cur.fetchall()}
    build = [u for u in qualifying if not existing.get(own_index_name(u), (False, 0))[0]]
    wanted = {own_index_name(u) for u in qualifying}
    # Half the bound before dropping: a user deleting a few rows at the bound keeps theirs.
    # An invalid index (an interrupted build) of a user who no longer qualifies goes too.
    drop = sorted(
        name
        for name, (valid, docs) in existing.items()
        if docs * 2 < min_rows or (not valid and name not in wanted)
    )
    return OwnIndexPlan(build, drop)


async def build_own_index(conn: AsyncConnection, user_id: int) -> None:
    """Build ``user_id``'s own index; an invalid one left by an interrupted build goes first.

    ``conn`` must be in autocommit mode (``CREATE INDEX CONCURRENTLY``).
    """
    name = sql.Identifier(own_index_name(user_id))
    cur = await conn.execute(
        "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)",
        (own_index_name(user_id),),
    )
    row = await cur.fetchone()
    if row is not None and row[0]:
        return
    if row is not None:
        await conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(name))
    await conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(BUILD_MEMORY)))
    try:
        await conn.execute(
            sql.SQL(
                "CREATE INDEX CONCURRENTLY {} ON memories"
                " USING hnsw (embedding vector_cosine_ops) WHERE user_id = {}"
            ).format(name, sql.Literal(int(user_id)))
        )
    finally:
        await conn.execute("RESET maintenance_work_mem")


async def drop_own_index(conn: AsyncConnection, name: str) -> None:
    """Drop an own index by name (autocommit ``conn``); a name not of ours is refused."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"not a user's own index: {name!r}")
    await conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
