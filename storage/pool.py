"""The async connection pool: created closed, opened at a lifecycle edge."""

from __future__ import annotations

import select
from collections.abc import Awaitable, Callable

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool

from .errors import StorageError

#: Candidates the HNSW scan keeps while searching; above the largest candidate
#: count recall asks for (4 x limit, at least 40; SUPPLEMENT §4).
HNSW_EF_SEARCH = 200


async def check_on_checkout(conn: AsyncConnection) -> None:
    """Raise if ``conn``'s server is gone: a round trip only when its socket says something.

    An idle connection has nothing to read. When its server dies or
    restarts, the socket turns readable: the end of the stream (the server
    process exited, or TCP keepalives found its machine gone) or a last
    FATAL message (a shutdown, ``pg_terminate_backend``). Only then is the
    connection asked (psycopg_pool's ``check_connection``, one empty round
    trip), so a healthy checkout costs one ``select`` instead of a round trip
    (measured on this machine: 0.25-1 ms more per checkout for the round trip).
    """
    try:
        readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.OperationalError):
        readable = [True]  # no usable socket: let the real check say so
    if readable:
        await AsyncConnectionPool.check_connection(conn)


async def _configure(conn: AsyncConnection) -> None:
    await register_vector_async(conn)
    # pgvector 0.8 iterative scans keep filtered HNSW queries (user, tags,
    # deletion) from returning fewer rows than asked for.
    await conn.execute(f"SET hnsw.ef_search = {HNSW_EF_SEARCH}")
    await conn.execute("SET hnsw.iterative_scan = relaxed_order")
    await conn.execute("SET TIME ZONE 'UTC'")


#: Seconds a connection may wait before PostgreSQL's server is asked if it is still there,
#: then between asks, and how many unanswered asks end it (libpq keepalives_*): a
#: connection to a server that vanished (its machine lost, no RST) fails in about 11 s.
KEEPALIVE_IDLE_S = 5
KEEPALIVE_INTERVAL_S = 2
KEEPALIVE_COUNT = 3
#: Seconds psycopg_pool keeps retrying a connection that failed (see make_pool).
RECONNECT_TIMEOUT_S = 5.0
#: Milliseconds sent data may stay unacknowledged before the connection is dropped
#: (libpq tcp_user_timeout, Linux): a write to a vanished server fails as fast.
TCP_USER_TIMEOUT_MS = 10_000


def connection_defaults(
    dsn: str,
    *,
    connect_timeout_s: int = 5,
    statement_timeout_s: int = 0,
    writable: bool = True,
) -> str:
    """``dsn`` with bounded timeouts and, for a primary named among several hosts, failover.

    Whatever the DSN sets itself wins. Added when absent:

    - ``target_session_attrs=read-write`` when ``writable`` and several hosts are
      named: libpq then tries each host in turn and keeps the one that accepts
      writes, so after a standby is promoted a new connection finds it (issue 29);
    - ``connect_timeout`` (per host), TCP keepalives and ``tcp_user_timeout``, so
      neither a connection attempt nor a statement on a dead server hangs;
    - ``statement_timeout`` (through ``options``) when ``statement_timeout_s`` > 0.

    Returns libpq's key=value form (what the pools and ``pg_dump`` accept).
    """
    params: dict[str, str | int | None] = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    hosts = str(params.get("host") or params.get("hostaddr") or "").split(",")
    if writable and len(hosts) > 1:
        params.setdefault("target_session_attrs", "read-write")
    params.setdefault("connect_timeout", connect_timeout_s)
    params.setdefault("keepalives", 1)
    params.setdefault("keepalives_idle", KEEPALIVE_IDLE_S)
    params.setdefault("keepalives_interval", KEEPALIVE_INTERVAL_S)
    params.setdefault("keepalives_count", KEEPALIVE_COUNT)
    params.setdefault("tcp_user_timeout", TCP_USER_TIMEOUT_MS)
    if statement_timeout_s > 0:
        options = str(params.get("options") or "")
        if "statement_timeout" not in options:
            params["options"] = (
                f"{options} -c statement_timeout={statement_timeout_s * 1000}".strip()
            )
    return make_conninfo("", **params)


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

    Each connection is checked as it is handed out (:func:`check_on_checkout`):
    after a failover every idle connection of the pool points at the
    dead primary, and each is then discarded and replaced by a new one, which
    libpq connects to the promoted server (:func:`connection_defaults`), instead
    of failing the request it was handed to. A connection that breaks while in
    use is discarded when it comes back (psycopg_pool does so for a closed or
    broken connection), and its request answers DATABASE_ERROR.
    """
    return AsyncConnectionPool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        open=False,
        configure=_configure,
        check=check_on_checkout,
        name=name,
        kwargs={"autocommit": True},
        # psycopg_pool retries a failed connection with a doubling delay until this
        # timeout, then gives the slot up; the next request that finds no connection
        # starts a fresh attempt at once. A short timeout keeps the delay short, so a
        # promoted primary is found within seconds of the promotion, not after a backoff
        # that grew for as long as the failover took (seen: 4-30 s with 60 s).
        reconnect_timeout=RECONNECT_TIMEOUT_S,
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
