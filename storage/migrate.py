"""Numbered SQL migrations, applied in order, one transaction each.

Files are ``storage/migrations/NNNN_name.sql``. ``{dim}`` in a file is the
embedding dimension (fixed when the database is created). A database whose
schema is newer than this code is refused (DESIGN: Data). What a database
has applied is read by ``storage.schema``.
"""

from __future__ import annotations

import psycopg
from psycopg import AsyncConnection

from .citus_layout import apply_citus_layout
from .errors import StorageError
from .own_indexes import OWN_INDEX_LOCK
from .schema import applied_versions, available_migrations, current_version, stored_dimensions

# Serialises concurrent migrators (two web processes starting together).
_LOCK_ID = 7_236_118_201


async def migrate(dsn: str, *, dimensions: int) -> list[int]:
    """Apply every pending migration; return the versions applied.

    Raises StorageError for a database newer than this code or one created
    for another embedding dimension.
    """
    applied: list[int] = []
    migrations = available_migrations()
    async with await AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_ID,))
        try:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version ("
                " version integer PRIMARY KEY,"
                " name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            version = await current_version(conn)
            done = await applied_versions(conn)
            if version > migrations[-1].version:
                raise StorageError(
                    f"the database schema is at version {version}, newer than this code "
                    f"({migrations[-1].version}); upgrade OwnSona before starting it"
                )
            stored = await stored_dimensions(conn)
            if stored is not None and stored != dimensions:
                raise StorageError(
                    f"the database holds {stored}-dimension embeddings but the configured "
                    f"embedding model has {dimensions}; switch back or run `ownsona reembed`"
                )
            pending = [m for m in migrations if m.version not in done]
            if pending and done:
                # A migration's CREATE INDEX or ALTER TABLE would wait behind a running
                # own-index build with every write queued behind it: wait here instead.
                await conn.execute("SELECT pg_advisory_lock(%s, %s)", OWN_INDEX_LOCK)
            # Every migration not yet recorded, in number order (a branch that
            # lands a lower number later still gets it applied).
            for migration in pending:
                text = migration.sql.replace("{dim}", str(int(dimensions)))
                try:
                    async with conn.transaction():
                        await conn.execute(text)
                        await conn.execute(
                            "INSERT INTO schema_version (version, name) VALUES (%s, %s)",
                            (migration.version, migration.name),
                        )
                except psycopg.Error as ex:
                    raise StorageError(f"migration {migration.name} failed: {ex}") from ex
                applied.append(migration.version)
            await apply_citus_layout(conn)  # a no-op unless the database is a Citus coordinator
        finally:
            await conn.execute("SELECT pg_advisory_unlock_all()")
    return applied
