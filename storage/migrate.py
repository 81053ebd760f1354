"""Numbered SQL migrations, applied in order, one transaction each.

Files are ``storage/migrations/NNNN_name.sql``. ``{dim}`` in a file is the
embedding dimension (fixed when the database is created). A database whose
schema is newer than this code is refused (DESIGN: Data).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import psycopg
from psycopg import AsyncConnection

from .errors import StorageError

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
# Serialises concurrent migrators (two web processes starting together).
_LOCK_ID = 7_236_118_201


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def available_migrations() -> list[Migration]:
    found = []
    for entry in resources.files("storage.migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), entry.name, entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise StorageError(f"two migrations share a number: {versions}")
    return found


def latest_version() -> int:
    return available_migrations()[-1].version


async def applied_versions(conn: AsyncConnection) -> set[int]:
    exists = await (
        await conn.execute("SELECT to_regclass('schema_version') IS NOT NULL")
    ).fetchone()
    if not exists or not exists[0]:
        return set()
    rows = await (await conn.execute("SELECT version FROM schema_version")).fetchall()
    return {int(r[0]) for r in rows}


async def current_version(conn: AsyncConnection) -> int:
    exists = await (
        await conn.execute("SELECT to_regclass('schema_version') IS NOT NULL")
    ).fetchone()
    if not exists or not exists[0]:
        return 0
    row = await (
        await conn.execute("SELECT coalesce(max(version), 0) FROM schema_version")
    ).fetchone()
    return int(row[0]) if row else 0


async def stored_dimensions(conn: AsyncConnection) -> int | None:
    exists = await (await conn.execute("SELECT to_regclass('store_meta') IS NOT NULL")).fetchone()
    if not exists or not exists[0]:
        return None
    row = await (
        await conn.execute("SELECT value FROM store_meta WHERE key = 'embedding_dimensions'")
    ).fetchone()
    return int(row[0]) if row else None


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
            # Every migration not yet recorded, in number order (a branch that
            # lands a lower number later still gets it applied).
            for migration in migrations:
                if migration.version in done:
                    continue
                text = migration.sql.replace("{dim}", str(int(dimensions)))
                try:
                    async with conn.transaction():
                        await conn.execute(text)  # type: ignore[arg-type]
                        await conn.execute(
                            "INSERT INTO schema_version (version, name) VALUES (%s, %s)",
                            (migration.version, migration.name),
                        )
                except psycopg.Error as ex:
                    raise StorageError(f"migration {migration.name} failed: {ex}") from ex
                applied.append(migration.version)
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_ID,))
    return applied


async def check_schema(conn: AsyncConnection) -> None:
    """Refuse a database that is not migrated to exactly this code's version."""
    done = await applied_versions(conn)
    latest = latest_version()
    if done and max(done) > latest:
        raise StorageError(f"database schema {max(done)} is newer than this code ({latest})")
    missing = sorted({m.version for m in available_migrations()} - done)
    if missing:
        raise StorageError(f"database lacks migrations {missing}; run `ownsona migrate`")
