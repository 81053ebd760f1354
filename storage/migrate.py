"""Numbered SQL migrations, applied in order, one transaction each, while users write.

Files are ``storage/migrations/NNNN_name.sql``. ``{dim}`` in a file is the
embedding dimension (fixed when the database is created). A database whose
schema is newer than this code is refused (DESIGN: Data). What a database
has applied is read by ``storage.schema``.

``ownsona migrate`` runs while users write (a rolling upgrade), so a
migration must never be the reason a user's call fails, nor deadlock with one:

- every lock a migration waits for is waited for at most :func:`lock_wait_ms`,
  shorter than the server's ``deadlock_timeout``: in a wait cycle with a
  user's transaction the migration gives way before PostgreSQL's deadlock
  check picks a victim, and its queued lock request never holds users' calls
  back for longer than that;
- a migration that names its tables in a ``-- lock first: a, b`` line (or
  ``-- lock first: every table``) takes all their ACCESS EXCLUSIVE locks in
  one statement, in name order, before anything else, bounded as a whole by
  a statement timeout shorter than ``deadlock_timeout``: once it holds them it
  waits for no table again, so no user can be waiting on it while it waits on
  the user. A migration that alters several tables users write in one
  transaction says so this way;
- a migration that builds an index on a table users write says so in a
  ``-- concurrently: <index name>`` line and holds that one ``CREATE INDEX
  CONCURRENTLY IF NOT EXISTS`` statement: it runs outside a transaction, so
  reads and writes go on while it scans the table (in a transaction, a build
  holds every write for the whole scan). An invalid index of that name, left by
  an interrupted build, is dropped before each run;
- a migration that gave way (lock wait over, deadlock, serialisation
  failure) is rolled back and run again after a growing, jittered pause, at
  most :data:`MIGRATION_ATTEMPTS` times, each retry logged.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import time

import psycopg
from psycopg import AsyncConnection, sql

from .advisory import wait_for_advisory_lock
from .citus_layout import apply_citus_layout
from .errors import StorageError
from .own_indexes import OWN_INDEX_LOCK
from .schema import (
    Migration,
    applied_versions,
    available_migrations,
    current_version,
    stored_dimensions,
)

# Serialises concurrent migrators (two web processes starting together).
_LOCK_ID = 7_236_118_201
#: Longest a migration waits for one lock, in milliseconds, unless deadlock_timeout is shorter.
MAX_LOCK_WAIT_MS = 200
#: Runs of one migration (the first included) before ``migrate`` gives up.
MIGRATION_ATTEMPTS = 30
#: Pause before the first retry, doubling after each, in seconds; jittered, capped.
FIRST_BACKOFF_S = 0.05
MAX_BACKOFF_S = 3.0
#: SQLSTATEs that mean "another transaction was in the way": run the migration again.
_GAVE_WAY = frozenset({"55P03", "57014", "40P01", "40001"})
_LOCK_FIRST = re.compile(r"^--\s*lock first:\s*(.+?)\s*$", re.MULTILINE | re.IGNORECASE)
_EVERY_TABLE = "every table"
_CONCURRENTLY = re.compile(r"^--\s*concurrently:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)

_log = logging.getLogger(__name__)


async def migrate(dsn: str, *, dimensions: int, up_to: int | None = None) -> list[int]:
    """Apply every pending migration (up to version ``up_to``); return the versions applied.

    Raises StorageError for a database newer than this code, one created
    for another embedding dimension, or a migration that failed (or could
    not get its locks in :data:`MIGRATION_ATTEMPTS` runs).
    """
    applied: list[int] = []
    migrations = available_migrations()
    async with await AsyncConnection.connect(dsn, autocommit=True) as conn:
        await wait_for_advisory_lock(conn, _LOCK_ID)
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
            pending = [
                m
                for m in migrations
                if m.version not in done and (up_to is None or m.version <= up_to)
            ]
            if pending and done:
                # A migration's CREATE INDEX or ALTER TABLE would wait behind a running
                # own-index build with every write queued behind it: wait here instead.
                await wait_for_advisory_lock(conn, *OWN_INDEX_LOCK)
            wait_ms = await lock_wait_ms(conn)
            # Every migration not yet recorded, in number order (a branch that
            # lands a lower number later still gets it applied).
            for migration in pending:
                await _apply(conn, migration, dimensions, wait_ms)
                applied.append(migration.version)
            await apply_citus_layout(conn)  # a no-op unless the database is a Citus coordinator
        finally:
            await conn.execute("SELECT pg_advisory_unlock_all()")
    return applied


async def lock_wait_ms(conn: AsyncConnection) -> int:
    """How long a migration waits for one lock: well under the server's deadlock_timeout."""
    cur = await conn.execute("SELECT setting::int FROM pg_settings WHERE name = 'deadlock_timeout'")
    row = await cur.fetchone()
    deadlock_ms = int(row[0]) if row else 1000
    return max(10, min(MAX_LOCK_WAIT_MS, deadlock_ms // 5))


async def _apply(
    conn: AsyncConnection, migration: Migration, dimensions: int, wait_ms: int
) -> None:
    text = migration.sql.replace("{dim}", str(int(dimensions)))
    lock_first = _lock_first(migration.sql)
    concurrent_index = _concurrent_index(migration.sql)
    backoff = FIRST_BACKOFF_S
    for attempt in range(1, MIGRATION_ATTEMPTS + 1):
        started = time.monotonic()
        try:
            if concurrent_index is not None:
                await _build_concurrently(conn, migration, text, concurrent_index)
                return
            async with conn.transaction():
                await conn.execute("SELECT set_config('lock_timeout', %s, true)", (f"{wait_ms}ms",))
                if lock_first is not None:
                    await _lock_tables(conn, lock_first, wait_ms)
                await conn.execute(text)
                await conn.execute(
                    "INSERT INTO schema_version (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )
            return
        except psycopg.Error as ex:
            if ex.sqlstate not in _GAVE_WAY or attempt == MIGRATION_ATTEMPTS:
                raise StorageError(f"migration {migration.name} failed: {ex}") from ex
            pause = random.uniform(backoff / 2, backoff)
            _log.warning(
                "migration %s gave way to the database's users (%s, after %.0f ms); "
                "run %d of %d starts again in %.2f s",
                migration.name,
                ex.sqlstate,
                (time.monotonic() - started) * 1000,
                attempt + 1,
                MIGRATION_ATTEMPTS,
                pause,
                extra={"migration": migration.name, "sqlstate": ex.sqlstate, "attempt": attempt},
            )
            await asyncio.sleep(pause)
            backoff = min(MAX_BACKOFF_S, backoff * 2)


async def _build_concurrently(
    conn: AsyncConnection, migration: Migration, text: str, index: str
) -> None:
    """Run an index migration outside a transaction (``conn`` is in autocommit mode).

    Its ``CREATE INDEX CONCURRENTLY`` takes only a lock no user's read or write asks
    for (SHARE UPDATE EXCLUSIVE; the own-index builds that also do are held off by
    ``migrate``), so nobody queues behind it and it cannot be in a deadlock with a
    user: it waits, without a lock timeout, for the transactions already running to
    end, as any concurrent build must. Cut off anyway (a cancel, a lost connection),
    it leaves an invalid index behind, which the next run drops first (``IF NOT
    EXISTS`` would keep it, invalid, for good).
    """
    await conn.execute("SET lock_timeout = 0")
    try:
        cur = await conn.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", (index,)
        )
        row = await cur.fetchone()
        if row is not None and not row[0]:
            await conn.execute(
                sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(index))
            )
        if row is None or not row[0]:
            # A valid index of that name (built before the migration moved here) is
            # kept as it is: a concurrent build "IF NOT EXISTS" over it would still
            # wait for every running transaction, and Citus marks an existing
            # distributed index invalid for such a build (citus#8338).
            _log.info(
                "migration %s builds index %s concurrently: it waits for the transactions"
                " already running, then scans the table while users read and write",
                migration.name,
                index,
                extra={"migration": migration.name},
            )
            await conn.execute(text)
    finally:
        await conn.execute("RESET lock_timeout")
    await conn.execute(
        "INSERT INTO schema_version (version, name) VALUES (%s, %s)",
        (migration.version, migration.name),
    )


def _concurrent_index(text: str) -> str | None:
    """The index a ``-- concurrently:`` migration builds, or None for a transactional one."""
    match = _CONCURRENTLY.search(text)
    return match.group(1) if match else None


def _lock_first(text: str) -> list[str] | None:
    """The tables a migration's ``-- lock first:`` line names; ``[]`` for every table."""
    match = _LOCK_FIRST.search(text)
    if match is None:
        return None
    named = match.group(1).strip()
    if named.lower() == _EVERY_TABLE:
        return []
    return [name.strip() for name in named.split(",") if name.strip()]


async def _lock_tables(conn: AsyncConnection, tables: list[str], wait_ms: int) -> None:
    """ACCESS EXCLUSIVE on ``tables`` (all of the schema's if empty), in name order, bounded.

    The statement as a whole is cut off well inside deadlock_timeout: a user
    that queued behind one of these locks never waits on this transaction long
    enough for its own deadlock check to run while this one waits too.
    """
    if not tables:
        cur = await conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename"
        )
        tables = [str(r[0]) for r in await cur.fetchall()]
        if not tables:
            return  # a schema with no table yet: nothing anyone could be writing
    previous = await (await conn.execute("SELECT current_setting('statement_timeout')")).fetchone()
    await conn.execute("SELECT set_config('statement_timeout', %s, true)", (f"{2 * wait_ms}ms",))
    await conn.execute(
        sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(
            sql.SQL(", ").join(sql.Identifier(t) for t in sorted(tables))
        )
    )
    await conn.execute(
        "SELECT set_config('statement_timeout', %s, true)",
        (str(previous[0]) if previous else "0",),
    )
