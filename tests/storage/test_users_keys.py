"""Account and signing-key SQL (storage.users, storage.keys) on real PostgreSQL."""

from __future__ import annotations

import asyncio

from storage import keys, users

JWK = {"kty": "RSA", "n": "AQAB", "e": "AQAB", "d": "AQAB"}


async def test_insert_and_get_user(pool, clean_db):
    async with pool.connection() as conn:
        assert await users.has_users(conn) is False
        row = await users.insert_user(conn, "alice", "$argon2id$hash")
        assert row is not None and row.id > 0
        assert (row.username, row.password_hash, row.disabled) == ("alice", "$argon2id$hash", False)
        assert await users.get_user(conn, row.id) == row
        assert await users.get_user_by_username(conn, "alice") == row
        assert await users.get_user_by_username(conn, "bob") is None
        assert await users.get_user(conn, row.id + 1000) is None
        assert await users.has_users(conn) is True


async def test_duplicate_username_returns_none_and_keeps_the_transaction(pool, clean_db):
    async with pool.connection() as conn:
        async with conn.transaction():
            first = await users.insert_user(conn, "alice", "h1")
            assert await users.insert_user(conn, "alice", "h2") is None
            # The transaction is still usable after the conflict.
            second = await users.insert_user(conn, "bob", "h3")
        assert first is not None and second is not None
        assert (await users.get_user_by_username(conn, "alice")).password_hash == "h1"


async def test_set_password(pool, clean_db):
    async with pool.connection() as conn:
        row = await users.insert_user(conn, "alice", "old")
        assert await users.set_password(conn, row.id, "new") is True
        assert (await users.get_user(conn, row.id)).password_hash == "new"
        assert await users.set_password(conn, row.id + 1000, "new") is False


async def test_bootstrap_lock_serialises_transactions(pool, clean_db):
    order: list[str] = []

    async def holder() -> None:
        async with pool.connection() as conn, conn.transaction():
            await users.lock_account_bootstrap(conn)
            order.append("first locked")
            await asyncio.sleep(0.2)
            order.append("first done")

    async def waiter() -> None:
        await asyncio.sleep(0.05)
        async with pool.connection() as conn, conn.transaction():
            await users.lock_account_bootstrap(conn)
            order.append("second locked")

    await asyncio.gather(holder(), waiter())
    assert order == ["first locked", "first done", "second locked"]


async def test_keys_listed_newest_first_with_retired_grace(pool, clean_db):
    async with pool.connection() as conn:
        old = await keys.insert_key(conn, "k-old", "RS256", JWK)
        await conn.commit()
        new = await keys.insert_key(conn, "k-new", "RS256", {**JWK, "kid": "k-new"})
        await conn.commit()
        assert new.private_jwk == {**JWK, "kid": "k-new"}
        assert old.retired_at is None

        listed = await keys.list_usable_keys(conn, 3600)
        assert [k.kid for k in listed] == ["k-new", "k-old"]

        assert await keys.retire_key(conn, "k-old") is True
        assert await keys.retire_key(conn, "k-old") is False
        assert await keys.retire_key(conn, "nope") is False
        await conn.commit()

        listed = await keys.list_usable_keys(conn, 3600)
        assert [k.kid for k in listed] == ["k-new", "k-old"]
        assert listed[1].retired_at is not None
        # Past the grace period the retired key is no longer usable.
        assert [k.kid for k in await keys.list_usable_keys(conn, 0)] == ["k-new"]


async def test_retire_other_keys(pool, clean_db):
    async with pool.connection() as conn:
        for kid in ("a", "b", "c"):
            await keys.insert_key(conn, kid, "RS256", JWK)
        assert await keys.retire_other_keys(conn, "c") == 2
        await conn.commit()
        active = [k.kid for k in await keys.list_usable_keys(conn, 3600) if k.retired_at is None]
        assert active == ["c"]
