"""The database an admin command works on: found (or started), checked, pooled.

Every ``ownsona`` command that needs the schema goes through
:func:`admin_pool`, so each of them refuses a database that was never
migrated with the same one line (:class:`DatabaseNotSetUp`, exit status 2)
instead of waiting out the pool's open timeout.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from config.settings import Settings
from storage.migrate import current_version
from storage.pool import make_pool

from .database import resolve_database


class DatabaseNotSetUp(Exception):
    """The database has no schema yet: no server or ``ownsona migrate`` has run on it."""


async def require_set_up(settings: Settings, dsn: str) -> None:
    """Raise DatabaseNotSetUp unless migrations have run on ``dsn``.

    Checked on a plain connection before any pool opens: the pool's
    connections register the pgvector type, which an unmigrated database
    lacks, and it would retry that for its whole open timeout.
    """
    async with await AsyncConnection.connect(dsn, autocommit=True) as conn:
        version = await current_version(conn)
    if version == 0:
        where = "at DATABASE_URL" if settings.database_url else f"in {settings.data_dir}"
        raise DatabaseNotSetUp(
            f"the database {where} is not set up: run `ownsona serve` or `ownsona migrate` first"
        )


@contextlib.asynccontextmanager
async def admin_pool(
    settings: Settings, *, name: str = "cli", max_size: int = 2, dsn: str | None = None
) -> AsyncIterator[AsyncConnectionPool]:
    """An open pool on the command's database (``dsn``, or the one the settings name)."""
    if dsn is None:
        dsn = await resolve_database(settings)
    await require_set_up(settings, dsn)
    pool = make_pool(dsn, min_size=1, max_size=max_size, name=name)
    await pool.open(wait=True, timeout=30)
    try:
        yield pool
    finally:
        await pool.close()
