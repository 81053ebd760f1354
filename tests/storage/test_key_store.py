"""The key store beside the data and the keyring on it: start-up checks, shredding, rotation."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool

from memory.keyring import Keyring
from storage import key_store
from storage.sealing.errors import DataKeyGone, MasterKeyError
from storage.sealing.master_key import MasterKey, new_key_text, parse_master_key


def _master() -> MasterKey:
    return parse_master_key(new_key_text(), source="test")


@pytest.fixture
def keys_data(dsn: str) -> Iterator[str]:
    """A data database of its own: its key store beside it is not the session's, whose
    master key every process the other tests start must find recorded there."""
    name = f"keytest_{secrets.token_hex(4)}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    params = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    yield make_conninfo("", **{**params, "dbname": name})
    with psycopg.connect(dsn, autocommit=True) as conn:
        for db in (name, f"{name}_keys"):
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db))
            )


@pytest.fixture
async def keys_pool(keys_data: str) -> AsyncIterator[AsyncConnectionPool]:
    """A fresh key store beside its data database (created by ensure_key_store)."""
    url = key_store.beside(keys_data)
    await key_store.ensure_key_store(url, create_from=keys_data)
    pool = key_store.make_key_store_pool(url)
    await pool.open()
    yield pool
    await pool.close()


async def test_the_key_store_is_a_database_of_its_own(
    keys_data: str, keys_pool: AsyncConnectionPool
) -> None:
    with psycopg.connect(keys_data) as conn:
        names = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables")]
        database = conn.execute("SELECT current_database()").fetchone()
    assert "data_keys" not in names
    assert database is not None
    async with keys_pool.connection() as conn:
        cur = await conn.execute("SELECT current_database()")
        row = await cur.fetchone()
    assert row is not None and row[0] == f"{database[0]}_keys"


async def test_a_wrong_master_key_is_refused_at_start(keys_pool: AsyncConnectionPool) -> None:
    right = _master()
    await Keyring(right, keys_pool).check()  # first start: recorded
    await Keyring(right, keys_pool).check()  # same key: fine
    with pytest.raises(MasterKeyError, match="OWNSONA_MASTER_KEY is not the master key"):
        await Keyring(_master(), keys_pool).check()


async def test_a_users_key_is_made_once_and_opens_in_another_process(
    keys_pool: AsyncConnectionPool,
) -> None:
    master = _master()
    first, second = Keyring(master, keys_pool), Keyring(master, keys_pool)
    sealed = (await first.user_keys(5)).seal("I live at 12 Elm Street", 99, "text")
    async with keys_pool.connection() as conn:
        stored = await key_store.wrapped_key(conn, 5)
    assert stored is not None and b"Elm" not in stored[1]
    assert (await second.user_keys(5, create=False)).open(sealed, 99, "text") == (
        "I live at 12 Elm Street"
    )


async def test_deleting_a_user_destroys_their_key(keys_pool: AsyncConnectionPool) -> None:
    master = _master()
    ring, other_process = Keyring(master, keys_pool), Keyring(master, keys_pool)
    await ring.user_keys(5)
    await ring.user_keys(6)
    assert await ring.destroy(5)
    with pytest.raises(DataKeyGone):
        await ring.user_keys(5, create=False)
    with pytest.raises(DataKeyGone):
        await other_process.user_keys(5, create=False)
    await other_process.user_keys(6, create=False)  # the others stay


async def test_rotation_rewraps_every_key_and_retires_the_old_master_key(
    keys_pool: AsyncConnectionPool,
) -> None:
    old, new = _master(), _master()
    before = Keyring(old, keys_pool)
    await before.check()
    sealed = {u: (await before.user_keys(u)).seal(f"memory of {u}", 1, "text") for u in (1, 2, 3)}
    during = Keyring(new, keys_pool, previous=old)
    await during.check()
    assert await during.rotate(batch=2) == 3
    after = Keyring(new, keys_pool)
    await after.check()
    for user, value in sealed.items():
        assert (await after.user_keys(user, create=False)).open(
            value, 1, "text"
        ) == f"memory of {user}"
    async with keys_pool.connection() as conn:
        assert await key_store.count_keys(conn) == {new.id: 3}
    with pytest.raises(MasterKeyError):
        await Keyring(old, keys_pool).check()


async def test_deleting_an_account_destroys_its_key_first(
    pool: AsyncConnectionPool, clean_db: str, keys_pool: AsyncConnectionPool
) -> None:
    from auth.accounts import add_user, delete_account

    ring = Keyring(_master(), keys_pool)
    gone = await add_user(pool, "leaving", "a long enough password")
    stays = await add_user(pool, "staying", "a long enough password")
    for user_id in (gone, stays):
        await ring.user_keys(user_id)
    await delete_account(pool, "leaving", destroy_key=ring.destroy)
    with pytest.raises(DataKeyGone):
        await Keyring(ring.master, keys_pool).user_keys(gone, create=False)
    await Keyring(ring.master, keys_pool).user_keys(stays, create=False)
