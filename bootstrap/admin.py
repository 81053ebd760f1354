"""The database an admin command works on: found (or started), migrated or checked, pooled.

Every ``ownsona`` command that needs the schema goes through
:func:`admin_pool`, so each of them refuses a database that was never
migrated with the same one line (:class:`DatabaseNotSetUp`, exit status 2)
instead of waiting out the pool's open timeout. ``ownsona migrate`` and
``ownsona import`` create the schema with :func:`migrate_database`; ``ownsona
db`` looks at the embedded cluster through :func:`cluster_status` and
:func:`stop_embedded_now`. A command that must refuse a schema older or
newer than its code (``reembed``, ``relations rebuild``) calls
:func:`check_schema` on one of the pool's connections.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from config.settings import Settings
from memory.deps import Deps
from memory.providers.embedders import Embedder
from storage.embedded import cluster_status, stop_embedded_now
from storage.migrate import migrate
from storage.pool import make_pool
from storage.schema import check_schema, current_version

from .database import resolve_database
from .providers import make_embedder, make_extractor

__all__ = [
    "DatabaseNotSetUp",
    "admin_pool",
    "check_schema",
    "cluster_status",
    "extraction_deps",
    "migrate_database",
    "require_set_up",
    "stop_embedded_now",
]


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


async def migrate_database(
    settings: Settings, dsn: str | None = None, embedder: Embedder | None = None
) -> list[int]:
    """Apply the pending migrations to the command's database; the versions applied.

    A new schema is sized for the configured embedder: ``embedder`` (left
    open), or one built and closed here to learn its width.
    """
    if dsn is None:
        dsn = await resolve_database(settings)
    if embedder is not None:
        return await migrate(dsn, dimensions=await embedder.ensure_ready())
    built = await asyncio.to_thread(make_embedder, settings)
    try:
        dimensions = await built.ensure_ready()
    finally:
        await built.aclose()
    return await migrate(dsn, dimensions=dimensions)


@contextlib.asynccontextmanager
async def extraction_deps(settings: Settings, pool: AsyncConnectionPool) -> AsyncIterator[Deps]:
    """The use cases' Deps for a command that extracts relations (``relations rebuild``).

    Extraction never embeds, but Deps holds a real embedder (built from the
    settings like a server's, closed on exit) rather than a stand-in.
    """
    from .sealing import admin_keyring

    embedder = await asyncio.to_thread(make_embedder, settings)
    dsn = pool.conninfo
    assert isinstance(dsn, str)
    try:
        # Sealed rows are opened with their users' keys (docs/at-rest.md).
        async with admin_keyring(settings, dsn) as keyring:
            yield Deps(
                settings=settings,
                pool=pool,
                embedder=embedder,
                extractor=make_extractor(settings),
                keyring=keyring,
            )
    finally:
        await embedder.aclose()
