"""``ownsona token``'s use cases (auth.cli_tokens) on real PostgreSQL.

tests/ops/test_token_commands.py runs the command itself; these call the use
cases directly, for the cases its output does not show.
"""

from __future__ import annotations

import psycopg
import pytest

from auth.accounts import set_disabled
from auth.cli_tokens import live_tokens, mint_cli_token, revoke_all, revoke_cli_token, revoke_grant
from auth.errors import AccountError
from auth.keys import KeyStore
from auth.tokens import verify_access_token
from storage.tokens import CLI_CLIENT_ID
from tests.conftest import make_user


def _count(dsn: str, table: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    assert row is not None
    return int(row[0])


async def test_a_minted_token_is_recorded_listed_and_revoked(pool, clean_db, settings):
    alice = make_user(clean_db, "alice")
    token = await mint_cli_token(
        pool, settings, username=" Alice", scope="memory:read", ttl_s=600, label="backup job"
    )
    keystore = KeyStore(pool, access_token_ttl_s=settings.access_token_ttl_s)
    await keystore.load()
    principal = await verify_access_token(keystore, settings, token)
    assert (principal.user_id, principal.client_id) == (alice, CLI_CLIENT_ID)

    cli_tokens, grants = await live_tokens(pool, "alice")
    assert [(t.username, t.label, t.scope) for t in cli_tokens] == [
        ("alice", "backup job", "memory:read")
    ]
    assert (cli_tokens[0].expires_at - cli_tokens[0].issued_at).total_seconds() == 600
    assert grants == []
    assert await live_tokens(pool, None) == (cli_tokens, [])

    assert await revoke_cli_token(pool, cli_tokens[0].id)
    assert not await revoke_cli_token(pool, cli_tokens[0].id)
    assert await live_tokens(pool, "alice") == ([], [])


async def test_minting_for_an_unknown_account_names_it_as_given(pool, clean_db, settings):
    with pytest.raises(AccountError) as caught:
        await mint_cli_token(
            pool, settings, username="Nobody", scope="memory:read", ttl_s=None, label=None
        )
    assert caught.value.problem == "unknown_user"
    assert caught.value.message.startswith("No account named 'Nobody';")
    # Refused before the key ring is read: no first signing key is made for it.
    assert _count(clean_db, "signing_keys") == 0


async def test_minting_for_a_disabled_account_says_how_to_enable_it(pool, clean_db, settings):
    make_user(clean_db, "bob")
    await set_disabled(pool, "bob", True)
    with pytest.raises(AccountError) as caught:
        await mint_cli_token(
            pool, settings, username="BOB", scope="memory:read", ttl_s=None, label=None
        )
    assert caught.value.problem == "account_disabled"
    assert "`ownsona user enable bob`" in caught.value.message
    assert _count(clean_db, "cli_tokens") == 0


async def test_unknown_names_and_ids(pool, clean_db):
    with pytest.raises(AccountError) as caught:
        await live_tokens(pool, "nobody")
    assert caught.value.problem == "unknown_user"
    with pytest.raises(AccountError):
        await revoke_all(pool, "nobody")
    assert not await revoke_cli_token(pool, 12)
    assert not await revoke_grant(pool, 12)


async def test_revoke_all_ends_the_accounts_cli_tokens(pool, clean_db, settings):
    make_user(clean_db, "alice")
    for _ in range(2):
        await mint_cli_token(
            pool, settings, username="alice", scope="memory:read", ttl_s=None, label=None
        )
    assert await revoke_all(pool, "alice") == 0  # no OAuth grants to revoke
    assert await live_tokens(pool, "alice") == ([], [])
