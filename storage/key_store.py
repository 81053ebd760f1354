"""The key store: wrapped per-user data keys and master key check values, in a database apart.

It is not the data database (``OWNSONA_KEYSTORE_URL``; by default ``<name>_keys``
beside it on the same server, created here if missing), so restoring a data backup
never brings a deleted user's key back: the restored data is opened with the
current key store (docs/at-rest.md, "Where the keys live"). Only bytes pass
through here; wrapping and opening happen in ``sealing``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

import psycopg
from psycopg import AsyncConnection, sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool

from .errors import StorageError

#: Idempotent: run at every start (the key store has no numbered migrations yet).
SCHEMA = """
CREATE TABLE IF NOT EXISTS master_keys (
    key_id      text PRIMARY KEY,
    check_value bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    retired_at  timestamptz
);
CREATE TABLE IF NOT EXISTS data_keys (
    user_id    bigint PRIMARY KEY,
    key_id     text NOT NULL,
    wrapped    bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS data_keys_key_id ON data_keys (key_id);
"""


def beside(data_dsn: str) -> str:
    """The default key store's DSN: the data database's, with ``<dbname>_keys`` as its name."""
    params = {k: str(v) for k, v in conninfo_to_dict(data_dsn).items()}
    params["dbname"] = f"{params.get('dbname') or params.get('user') or 'postgres'}_keys"
    return make_conninfo("", **params)


def _dbname(dsn: str) -> str:
    return str(conninfo_to_dict(dsn).get("dbname") or "")


async def ensure_key_store(keystore_dsn: str, *, create_from: str | None = None) -> None:
    """Create the key store's tables, and its database first if missing and ``create_from``
    (a DSN of the same server) is given."""
    try:
        conn = await AsyncConnection.connect(keystore_dsn, autocommit=True)
    except psycopg.OperationalError as ex:
        if create_from is None or "does not exist" not in str(ex):
            raise StorageError(f"key store: cannot connect: {ex}") from ex
        async with await AsyncConnection.connect(create_from, autocommit=True) as admin:
            # Another process created it meanwhile: DuplicateDatabase, or UniqueViolation
            # when both CREATE DATABASE statements got past PostgreSQL's own name check.
            with contextlib.suppress(
                psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation
            ):
                await admin.execute(
                    sql.SQL("CREATE DATABASE {}").format(sql.Identifier(_dbname(keystore_dsn)))
                )
        conn = await AsyncConnection.connect(keystore_dsn, autocommit=True)
    # Two processes starting together: one creates, the other waits.
    async with conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(3400034)")
        await conn.execute(SCHEMA)


async def recorded_master_keys(keystore_dsn: str, *, beside_data: str | None = None) -> list[str]:
    """The ids of the master keys the key store at ``keystore_dsn`` records.

    Empty when the store, or its database, does not exist yet: nothing was ever
    sealed under this deployment's key store. ``beside_data``: the data database's
    DSN, when the store is the default one beside it: whether its database exists is
    asked there (``pg_database``), so a deployment that never sealed does not try a
    connection to a database that is not there (which a pooler or a server in
    another language answers in words of its own, and every server logs as FATAL).
    """
    if beside_data is not None:
        try:
            data = await AsyncConnection.connect(beside_data, autocommit=True)
        except psycopg.OperationalError as ex:
            raise StorageError(f"cannot connect to the database: {ex}") from ex
        async with data:
            cur = await data.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (_dbname(keystore_dsn),)
            )
            if await cur.fetchone() is None:
                return []
    try:
        conn = await AsyncConnection.connect(keystore_dsn, autocommit=True)
    except psycopg.OperationalError as ex:
        if "does not exist" in str(ex):
            return []
        raise StorageError(f"key store: cannot connect: {ex}") from ex
    async with conn:
        cur = await conn.execute("SELECT to_regclass('master_keys') IS NOT NULL")
        row = await cur.fetchone()
        if row is None or not row[0]:
            return []
        cur = await conn.execute("SELECT key_id FROM master_keys ORDER BY key_id")
        return [str(r[0]) for r in await cur.fetchall()]


async def check_values(conn: AsyncConnection) -> dict[str, bytes]:
    """Every master key id the store knows, with its check value."""
    cur = await conn.execute("SELECT key_id, check_value FROM master_keys")
    return {str(r[0]): bytes(r[1]) for r in await cur.fetchall()}


async def add_check_value(conn: AsyncConnection, key_id: str, check: bytes) -> None:
    await conn.execute(
        "INSERT INTO master_keys (key_id, check_value) VALUES (%s, %s) ON CONFLICT DO NOTHING",
        (key_id, check),
    )


async def retire_check_values(conn: AsyncConnection, keep: str) -> list[str]:
    """Remove every master key's check value but ``keep``'s; return the ids removed."""
    cur = await conn.execute("DELETE FROM master_keys WHERE key_id <> %s RETURNING key_id", (keep,))
    return [str(r[0]) for r in await cur.fetchall()]


async def wrapped_key(conn: AsyncConnection, user_id: int) -> tuple[str, bytes] | None:
    """``(master key id, wrapped data key)`` of the user, or None (none yet, or shredded)."""
    cur = await conn.execute("SELECT key_id, wrapped FROM data_keys WHERE user_id = %s", (user_id,))
    row = await cur.fetchone()
    return None if row is None else (str(row[0]), bytes(row[1]))


async def add_wrapped_key(
    conn: AsyncConnection, user_id: int, key_id: str, wrapped: bytes
) -> tuple[str, bytes]:
    """Store the user's first data key; if another process stored one first, return that one."""
    await conn.execute(
        "INSERT INTO data_keys (user_id, key_id, wrapped) VALUES (%s, %s, %s)"
        " ON CONFLICT (user_id) DO NOTHING",
        (user_id, key_id, wrapped),
    )
    stored = await wrapped_key(conn, user_id)
    assert stored is not None
    return stored


async def delete_wrapped_key(conn: AsyncConnection, user_id: int) -> bool:
    """Destroy the user's wrapped data key (crypto-shredding); True if there was one."""
    cur = await conn.execute("DELETE FROM data_keys WHERE user_id = %s", (user_id,))
    return cur.rowcount > 0


async def keys_not_under(
    conn: AsyncConnection, key_id: str, *, limit: int
) -> list[tuple[int, str, bytes]]:
    """Up to ``limit`` ``(user id, key id, wrapped)`` wrapped under another master key."""
    cur = await conn.execute(
        "SELECT user_id, key_id, wrapped FROM data_keys WHERE key_id <> %s"
        " ORDER BY user_id LIMIT %s",
        (key_id, limit),
    )
    return [(int(r[0]), str(r[1]), bytes(r[2])) for r in await cur.fetchall()]


async def rewrap(
    conn: AsyncConnection, user_id: int, old_key_id: str, new_key_id: str, wrapped: bytes
) -> bool:
    """Replace the user's wrapped key if it is still the one under ``old_key_id``."""
    cur = await conn.execute(
        "UPDATE data_keys SET key_id = %s, wrapped = %s WHERE user_id = %s AND key_id = %s",
        (new_key_id, wrapped, user_id, old_key_id),
    )
    return cur.rowcount > 0


async def count_keys(conn: AsyncConnection) -> dict[str, int]:
    """Data keys per master key id."""
    cur = await conn.execute("SELECT key_id, count(*) FROM data_keys GROUP BY key_id")
    return {str(r[0]): int(r[1]) for r in await cur.fetchall()}


def make_key_store_pool(
    dsn: str | Callable[[], Awaitable[str]], *, max_size: int = 4
) -> AsyncConnectionPool:
    """A closed pool on the key store (no pgvector there: not ``storage.pool.make_pool``)."""
    return AsyncConnectionPool(
        dsn,
        min_size=0,
        max_size=max_size,
        open=False,
        kwargs={"autocommit": True},
        name="ownsona-keys",
    )
