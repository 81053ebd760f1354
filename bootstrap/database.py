"""Finding the database every process works on, and building its pools (created closed).

``DATABASE_URL`` when set (checked by connecting once), otherwise the
embedded cluster in ``OWNSONA_DATA_DIR``, started on first use. A pool is
built with a :class:`DatabaseAddress` as its conninfo (psycopg_pool 3.3
accepts an async callable), so it can be built before the address is known:
the address is resolved once, when the process opens its resources.
"""

from __future__ import annotations

import asyncio
import functools

from psycopg_pool import AsyncConnectionPool

from config.settings import Settings
from memory.deps import Deps
from memory.providers.embedders import Embedder
from storage.embedded import start_embedded
from storage.errors import StorageError
from storage.pool import DatabaseUnreachable, check_reachable, connection_defaults, make_pool


def primary_dsn(settings: Settings) -> str:
    """DATABASE_URL with its failover and timeout defaults (``storage.pool.connection_defaults``)."""
    assert settings.database_url is not None
    return connection_defaults(
        settings.database_url,
        connect_timeout_s=settings.db_connect_timeout_s,
        statement_timeout_s=settings.db_statement_timeout_s,
    )


async def resolve_database(settings: Settings) -> str:
    """DATABASE_URL (checked by connecting once), or the embedded cluster in OWNSONA_DATA_DIR.

    Raises StorageError naming DATABASE_URL when it cannot be used (address,
    credentials, ``sslmode``), instead of a pool retrying until its timeout.
    With several hosts the DSN handed out asks libpq for the writable one
    (``target_session_attrs=read-write``), so every pool of every process
    (web, worker, stdio, the commands) follows a promotion by itself.
    """
    if settings.database_url:
        dsn = primary_dsn(settings)
        try:
            await check_reachable(dsn)
        except DatabaseUnreachable as ex:
            raise StorageError(f"DATABASE_URL: cannot connect: {ex}") from ex
        return dsn
    # This process counts as a user of the cluster; the last one to exit stops it.
    return await asyncio.to_thread(functools.partial(start_embedded, settings.data_dir, hold=True))


class DatabaseAddress:
    """The DSN of this process's database, resolved on the first call and then remembered.

    An async callable, so it can be a pool's conninfo: every pool of the
    process (the web pool, the in-process worker's) shares one resolution,
    and so one hold on the embedded cluster. The opener awaits it once before
    any pool opens; pools on other event loops (the worker's) then only read
    it, which is why there is no asyncio lock here (it would bind to one loop).
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._dsn: str | None = None

    async def __call__(self) -> str:
        if self._dsn is None:
            self._dsn = await resolve_database(self._settings)
        return self._dsn


def process_pool(
    settings: Settings, conninfo: str | DatabaseAddress, *, name: str
) -> AsyncConnectionPool:
    """A closed pool of DB_POOL_MIN..DB_POOL_MAX connections to ``conninfo``."""
    return make_pool(
        conninfo,  # psycopg_pool 3.3: an async callable, resolved when the pool connects
        min_size=settings.db_pool_min,
        max_size=settings.db_pool_max,
        name=name,
    )


async def open_pool(pool: AsyncConnectionPool) -> None:
    """Open ``pool`` and wait for its first connections (at most 30 s)."""
    await pool.open(wait=True, timeout=30)


async def open_deps(
    settings: Settings, conninfo: str | DatabaseAddress, embedder: Embedder, *, name: str
) -> Deps:
    """Deps on a newly opened pool named ``name`` (the caller closes ``deps.pool``)."""
    pool = process_pool(settings, conninfo, name=name)
    await open_pool(pool)
    return Deps(settings=settings, pool=pool, embedder=embedder)
