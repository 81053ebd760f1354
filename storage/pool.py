"""The async connection pool: created closed, opened at a lifecycle edge."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool

from .errors import StorageError

#: Candidates the HNSW scan keeps while searching; above the largest candidate
#: count recall asks for (4 x limit, at least 40; SUPPLEMENT §4).
HNSW_EF_SEARCH = 200


async def _configure(conn: AsyncConnection) -> None:
    await register_vector_async(conn)
    # pgvector 0.8 iterative scans keep filtered HNSW queries (user, tags,
    # deletion) from returning fewer rows than asked for.
    await conn.execute(f"SET hnsw.ef_search = {HNSW_EF_SEARCH}")
    await conn.execute("SET hnsw.iterative_scan = relaxed_order")
    await conn.execute("SET TIME ZONE 'UTC'")


def make_pool(
    dsn: str | Callable[[], Awaitable[str]],
    *,
    min_size: int = 1,
    max_size: int = 10,
    name: str = "ownsona",
) -> AsyncConnectionPool:
    """A pool that is not yet open: call ``await pool.open()`` (or use ``async with``).

    Connections are in autocommit mode: a read is one round trip, with no
    BEGIN before it and no ROLLBACK when the connection goes back to the
    pool. Anything that writes more than one statement must run inside
    ``async with conn.transaction():``.
    """
    return AsyncConnectionPool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        open=False,
        configure=_configure,
        name=name,
        kwargs={"autocommit": True},
    )


class DatabaseUnreachable(StorageError):
    """The database refused or failed the connection (address, credentials, TLS)."""


async def check_reachable(dsn: str, *, timeout_s: int = 10) -> None:
    """Connect once, so a bad address, password or ``sslmode`` fails now, in plain words.

    A pool would instead retry quietly until its open timeout. The password
    is removed from the message in case a driver ever echoes the DSN.
    """
    try:
        conn = await AsyncConnection.connect(dsn, connect_timeout=timeout_s, autocommit=True)
    except psycopg.Error as ex:
        message = str(ex).strip() or type(ex).__name__
        try:
            password = conninfo_to_dict(dsn).get("password")
        except psycopg.ProgrammingError:
            password = None
        if password:
            message = message.replace(str(password), "***")
        raise DatabaseUnreachable(message) from ex
    await conn.close()
