"""Reading the schema's state: the migrations this code has, what a database has applied.

Read-only (``storage.migrate`` is the one that changes a schema), so use
cases and commands may check a database without being able to migrate it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from psycopg import AsyncConnection

from .errors import StorageError

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


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


async def check_schema(conn: AsyncConnection) -> None:
    """Refuse a database that is not migrated to exactly this code's version."""
    done = await applied_versions(conn)
    latest = latest_version()
    if done and max(done) > latest:
        raise StorageError(f"database schema {max(done)} is newer than this code ({latest})")
    missing = sorted({m.version for m in available_migrations()} - done)
    if missing:
        raise StorageError(f"database lacks migrations {missing}; run `ownsona migrate`")
