"""Accounts (auth.accounts) on real PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import UTC

import pytest
from argon2 import PasswordHasher

from auth.accounts import (
    DEFAULT_USERNAME,
    LoginAccount,
    add_user,
    authenticate_password,
    ensure_login_user,
    normalize_username,
)
from auth.errors import AccountError
from config.settings import Settings
from storage import users


async def test_add_and_authenticate(pool, clean_db):
    user_id = await add_user(pool, "alice", "correct horse")
    assert await authenticate_password(pool, "alice", "correct horse") == user_id
    # Usernames are case-insensitive and trimmed.
    assert await authenticate_password(pool, "  Alice ", "correct horse") == user_id
    assert await authenticate_password(pool, "alice", "wrong horse") is None
    assert await authenticate_password(pool, "nobody", "correct horse") is None
    assert await authenticate_password(pool, "bad name!", "correct horse") is None
    assert await authenticate_password(pool, "alice", "") is None
    assert await authenticate_password(pool, "alice", "x" * 5000) is None


async def test_duplicate_username_is_refused(pool, clean_db):
    await add_user(pool, "alice", "correct horse")
    with pytest.raises(AccountError) as caught:
        await add_user(pool, "ALICE", "another horse")
    assert caught.value.problem == "duplicate_username"


@pytest.mark.parametrize("username", ["", " ", "a" * 65, "al ice", "alice!", "ålice", "a/b"])
async def test_bad_usernames_are_refused(pool, clean_db, username):
    with pytest.raises(AccountError) as caught:
        await add_user(pool, username, "correct horse")
    assert caught.value.problem == "invalid_username"


def test_username_rules():
    assert normalize_username("A.b_c-d@E") == "a.b_c-d@e"
    assert normalize_username("a" * 64) == "a" * 64


async def test_short_password_is_refused(pool, clean_db):
    with pytest.raises(AccountError) as caught:
        await add_user(pool, "alice", "short")
    assert caught.value.problem == "invalid_password"


async def test_add_user_joins_the_callers_transaction(pool, clean_db):
    async with pool.connection() as conn:
        async with conn.transaction(force_rollback=True):
            user_id = await add_user(conn, "alice", "correct horse")
            assert await users.get_user(conn, user_id) is not None
        assert await users.get_user(conn, user_id) is None


async def test_disabled_accounts_cannot_sign_in(pool, clean_db):
    user_id = await add_user(pool, "alice", "correct horse")
    async with pool.connection() as conn:
        await conn.execute("UPDATE users SET disabled = true WHERE id = %s", (user_id,))
    # The right password learns why; a wrong one learns nothing more than for anyone.
    with pytest.raises(AccountError) as refused:
        await authenticate_password(pool, "alice", "correct horse")
    assert refused.value.problem == "account_disabled"
    assert await authenticate_password(pool, "alice", "wrong horse") is None


async def test_a_sign_in_is_recorded_for_user_list(pool, clean_db):
    await add_user(pool, "alice", "correct horse")
    assert await authenticate_password(pool, "alice", "wrong horse") is None
    async with pool.connection() as conn:
        (before,) = await users.list_accounts(conn)
    assert before.last_sign_in_at is None
    await authenticate_password(pool, "alice", "correct horse")
    async with pool.connection() as conn:
        (after,) = await users.list_accounts(conn)
    assert after.last_sign_in_at is not None and after.memory_count == 0


async def test_outdated_hash_is_upgraded_on_sign_in(pool, clean_db):
    weak = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1).hash("correct horse")
    async with pool.connection() as conn:
        row = await users.insert_user(conn, "alice", weak)
    assert await authenticate_password(pool, "alice", "correct horse") == row.id
    async with pool.connection() as conn:
        upgraded = (await users.get_user(conn, row.id)).password_hash
    assert upgraded != weak and upgraded.startswith("$argon2id$")
    assert await authenticate_password(pool, "alice", "correct horse") == row.id


async def test_empty_database_gets_owner_with_generated_password(pool, clean_db):
    account = await ensure_login_user(pool, Settings())
    assert account is not None and account.created
    assert account.username == DEFAULT_USERNAME
    assert account.generated_password is not None and len(account.generated_password) >= 20
    assert await authenticate_password(pool, "owner", account.generated_password) == account.user_id
    # Next start: accounts exist and nothing is configured, so nothing to do.
    assert await ensure_login_user(pool, Settings()) is None


async def test_existing_accounts_and_nothing_configured(pool, clean_db):
    await add_user(pool, "alice", "correct horse")
    assert await ensure_login_user(pool, Settings()) is None
    async with pool.connection() as conn:
        assert await users.get_user_by_username(conn, "owner") is None


async def test_configured_user_is_created_then_follows_the_environment(pool, clean_db):
    settings = Settings(login_username="Alice", login_password="first password")
    account = await ensure_login_user(pool, settings)
    assert account is not None
    assert (account.username, account.generated_password, account.created) == ("alice", None, True)
    assert await authenticate_password(pool, "alice", "first password") == account.user_id

    again = await ensure_login_user(pool, settings)
    assert again == LoginAccount(account.user_id, "alice", None, created=False)

    new_settings = settings.with_overrides(login_password="second password")
    changed = await ensure_login_user(pool, new_settings)
    assert changed is not None and changed.password_updated and changed.user_id == account.user_id
    assert await authenticate_password(pool, "alice", "first password") is None
    assert await authenticate_password(pool, "alice", "second password") == account.user_id


async def test_configured_username_without_password_generates_one(pool, clean_db):
    account = await ensure_login_user(pool, Settings(login_username="alice"))
    assert account is not None and account.generated_password is not None
    assert await authenticate_password(pool, "alice", account.generated_password) == account.user_id
    # Existing account, no password configured: left alone.
    again = await ensure_login_user(pool, Settings(login_username="alice"))
    assert again is not None and again.generated_password is None and not again.password_updated


async def test_configured_password_alone_belongs_to_owner(pool, clean_db):
    account = await ensure_login_user(pool, Settings(login_password="owner password"))
    assert account is not None and account.username == "owner"
    assert account.generated_password is None
    assert await authenticate_password(pool, "owner", "owner password") == account.user_id


async def test_bad_configuration_names_the_variable(pool, clean_db):
    with pytest.raises(AccountError, match="OWNSONA_LOGIN_USERNAME"):
        await ensure_login_user(
            pool, Settings(login_username="not valid!", login_password="long enough")
        )
    with pytest.raises(AccountError, match="OWNSONA_LOGIN_PASSWORD"):
        await ensure_login_user(pool, Settings(login_username="alice", login_password="short"))


async def test_processes_starting_together_create_one_owner(pool, clean_db):
    results = await asyncio.gather(*(ensure_login_user(pool, Settings()) for _ in range(3)))
    created = [r for r in results if r is not None]
    assert len(created) == 1 and created[0].generated_password is not None
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM users")
        assert (await cur.fetchone())[0] == 1


async def test_configured_user_started_together_is_created_once(pool, clean_db):
    settings = Settings(login_username="alice")
    results = await asyncio.gather(*(ensure_login_user(pool, settings) for _ in range(3)))
    assert sum(r.created for r in results) == 1
    assert sum(r.generated_password is not None for r in results) == 1
    assert len({r.user_id for r in results}) == 1


async def test_change_password_replaces_it_and_ends_browser_sign_ins(pool, clean_db):
    from datetime import datetime, timedelta

    from auth.accounts import change_password
    from storage import oauth as oauth_store

    alice = await add_user(pool, "alice", "correct horse")
    bob = await add_user(pool, "bob", "bobs horse")
    later = datetime.now(UTC) + timedelta(hours=1)
    async with pool.connection() as conn:
        await oauth_store.insert_session(conn, "alice-browser", alice, later)
        await oauth_store.insert_session(conn, "bob-browser", bob, later)

    assert await change_password(pool, " Alice ", "battery staple") == alice

    assert await authenticate_password(pool, "alice", "correct horse") is None
    assert await authenticate_password(pool, "alice", "battery staple") == alice
    async with pool.connection() as conn:
        assert await oauth_store.session_user(conn, "alice-browser") is None
        assert await oauth_store.session_user(conn, "bob-browser") == bob
    assert await authenticate_password(pool, "bob", "bobs horse") == bob


async def test_change_password_refuses_unknown_users_and_short_passwords(pool, clean_db):
    from auth.accounts import change_password

    await add_user(pool, "alice", "correct horse")
    with pytest.raises(AccountError) as caught:
        await change_password(pool, "nobody", "battery staple")
    assert caught.value.problem == "unknown_user"
    with pytest.raises(AccountError) as caught:
        await change_password(pool, "alice", "short")
    assert caught.value.problem == "invalid_password"
    assert await authenticate_password(pool, "alice", "correct horse") is not None


def test_user_commands_create_an_account_and_set_its_password(clean_db):
    """`ownsona user add` then `ownsona user passwd`, password on stdin as scripts pass it."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "DATABASE_URL": clean_db, "LOG_FORMAT": "text"}

    def ownsona(*args: str, password: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "scripts.cli", *args],
            input=password + "\n",
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    created = ownsona("user", "add", "carol", password="first password")
    assert created.returncode == 0, created.stderr
    changed = ownsona("user", "passwd", "carol", password="second password")
    assert changed.returncode == 0, changed.stderr
    assert "new password set for 'carol'" in changed.stdout
    unknown = ownsona("user", "passwd", "dave", password="second password")
    assert unknown.returncode == 2 and "no account 'dave'" in unknown.stderr
    for secret in ("first password", "second password"):
        assert secret not in created.stdout + created.stderr + changed.stdout + changed.stderr

    async def check() -> tuple[int | None, int | None]:
        from storage.pool import make_pool

        p = make_pool(clean_db, min_size=1, max_size=1, name="check")
        await p.open(wait=True)
        try:
            return (
                await authenticate_password(p, "carol", "first password"),
                await authenticate_password(p, "carol", "second password"),
            )
        finally:
            await p.close()

    old, new = asyncio.run(check())
    assert old is None and new is not None
