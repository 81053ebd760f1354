"""The owner can end any access at once (issue 12), checked at /mcp over HTTP.

Disabled, deleted and unknown accounts, a password change, revoked and
over-long tokens: the next request gets 401 with the RFC 6750 challenge.
"""

from __future__ import annotations

import time
from typing import Any

import falcon.testing

from auth import accounts
from auth.keys import KeyStore
from auth.tokens import mint_access_token
from storage import tokens as token_store
from tests.api.conftest import Mcp
from tests.auth.oauth_flow import (
    PASSWORD,
    Browser,
    alice_account,
    authorize,
    bob_account,
    browser,
    oauth_clean,
    oauth_http,
    oauth_options,
    register,
    rows,
    token,
)

__all__ = ["alice_account", "bob_account", "browser", "oauth_clean", "oauth_http", "oauth_options"]


async def _signed_in(oauth_http: Any, browser: Browser) -> tuple[Any, dict[str, Any]]:
    client = await register(oauth_http)
    body = (await token(oauth_http, client.token_form(await authorize(browser, client)))).json
    return client, body


async def _refresh(oauth_http: Any, client: Any, refresh_token: str) -> falcon.testing.Result:
    return await token(
        oauth_http,
        [
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
            ("client_id", client.client_id),
        ],
    )


def _refused(result: falcon.testing.Result) -> None:
    assert result.status_code == 401, result.text
    challenge = result.headers["www-authenticate"]
    assert challenge.startswith('Bearer resource_metadata="https://mem.example/'), challenge
    assert 'error="invalid_token"' in challenge


async def test_a_disabled_account_is_refused_at_once_and_enable_gives_access_back(
    oauth_http: Any, browser: Browser, alice_account: int, pool: Any
) -> None:
    client, body = await _signed_in(oauth_http, browser)
    mcp = Mcp(oauth_http, body["access_token"])
    assert (await mcp.request("tools/list")).status_code == 200

    await accounts.set_disabled(pool, "alice", True)
    _refused(await mcp.request("tools/list"))
    refreshed = await _refresh(oauth_http, client, body["refresh_token"])
    assert refreshed.status_code == 400 and refreshed.json["error"] == "invalid_grant"
    # The sign-in page says why, to whoever knows the password.
    fresh = Browser(oauth_http, remote_addr="203.0.113.9")
    page = await fresh.get("/oauth/authorize", client.authorization_params())
    answer = await fresh.submit(page, username="alice", password=PASSWORD)
    assert answer.status_code == 403 and "This account is disabled" in answer.text
    wrong = await fresh.submit(page, username="alice", password="not the password")
    assert wrong.status_code == 400 and "disabled" not in wrong.text

    await accounts.set_disabled(pool, "alice", False)
    assert (await mcp.request("tools/list")).status_code == 200


async def test_a_deleted_account_is_refused_and_only_its_rows_go(
    oauth_http: Any,
    browser: Browser,
    alice_account: int,
    bob_account: int,
    pool: Any,
    oauth_clean: str,
) -> None:
    _, alice = await _signed_in(oauth_http, browser)
    bob_browser = Browser(oauth_http, remote_addr="203.0.113.8")
    bob_client = await register(oauth_http)
    bob = (
        await token(
            oauth_http,
            bob_client.token_form(
                await authorize(
                    bob_browser, bob_client, username="bob", password="bob's own long password"
                )
            ),
        )
    ).json
    for user_id in (alice_account, bob_account):
        _memory_with_relation(oauth_clean, user_id)
    removed = await accounts.delete_account(pool, "alice")
    assert (removed.memories, removed.relations, removed.grants) == (1, 1, 1)

    _refused(await Mcp(oauth_http, alice["access_token"]).request("tools/list"))
    assert (await Mcp(oauth_http, bob["access_token"]).request("tools/list")).status_code == 200
    for table in ("memories", "memory_relations", "oauth_grants", "oauth_sessions"):
        owners = rows(oauth_clean, f"SELECT DISTINCT user_id FROM {table}")
        assert owners == [(bob_account,)], table


def _memory_with_relation(dsn: str, user_id: int) -> None:
    dimensions = rows(
        dsn,
        "SELECT atttypmod FROM pg_attribute"
        " WHERE attrelid = 'memories'::regclass AND attname = 'embedding'",
    )[0][0]
    memory_id = rows(
        dsn,
        """
        INSERT INTO memories (user_id, text, normalized_text, embedding, embedding_provider,
            embedding_model)
        VALUES (%s, 'likes tea', 'likes tea', array_fill(0.1::real, ARRAY[%s])::vector, 't', 't')
        RETURNING id""",
        user_id,
        dimensions,
    )[0][0]
    rows(
        dsn,
        """INSERT INTO memory_relations (user_id, memory_id, subject, predicate, object)
                 VALUES (%s, %s, 'user', 'likes', 'tea') RETURNING id""",
        user_id,
        memory_id,
    )


async def test_a_signed_token_for_an_unknown_subject_is_refused(
    oauth_http: Any, keystore: KeyStore, api_settings: Any, oauth_clean: str
) -> None:
    ghost = mint_access_token(
        keystore, api_settings, user_id=99999, client_id="c", scope="memory:read memory:write"
    )
    _refused(await Mcp(oauth_http, ghost.token).request("tools/list"))


async def test_a_password_change_ends_refresh_tokens_and_access_tokens(
    oauth_http: Any, browser: Browser, alice_account: int, pool: Any
) -> None:
    client, body = await _signed_in(oauth_http, browser)
    mcp = Mcp(oauth_http, body["access_token"])
    assert (await mcp.request("tools/list")).status_code == 200
    await accounts.change_password(pool, "alice", "a brand new password")
    _refused(await mcp.request("tools/list"))
    refreshed = await _refresh(oauth_http, client, body["refresh_token"])
    assert refreshed.status_code == 400 and refreshed.json["error"] == "invalid_grant"


async def test_revoke_all_ends_every_token_and_family(
    oauth_http: Any,
    browser: Browser,
    alice_account: int,
    pool: Any,
    keystore: KeyStore,
    api_settings: Any,
) -> None:
    client, body = await _signed_in(oauth_http, browser)
    cli = mint_access_token(
        keystore,
        api_settings,
        user_id=alice_account,
        client_id=token_store.CLI_CLIENT_ID,
        scope="memory:read",
    )
    async with pool.connection() as conn, conn.transaction():
        assert await accounts.end_access(conn, alice_account, "revoked by the owner") == 1
        assert await token_store.live_grants(conn, alice_account) == []
    _refused(await Mcp(oauth_http, body["access_token"]).request("tools/list"))
    _refused(await Mcp(oauth_http, cli.token).request("tools/list"))
    refreshed = await _refresh(oauth_http, client, body["refresh_token"])
    assert refreshed.status_code == 400 and refreshed.json["error"] == "invalid_grant"


async def test_oauth_revoke_takes_a_cli_token_without_client_authentication(
    oauth_http: Any, alice_account: int, keystore: KeyStore, api_settings: Any
) -> None:
    cli = mint_access_token(
        keystore,
        api_settings,
        user_id=alice_account,
        client_id=token_store.CLI_CLIENT_ID,
        scope="memory:read",
    )
    mcp = Mcp(oauth_http, cli.token)
    assert (await mcp.request("tools/list")).status_code == 200
    result = await oauth_http.simulate_post(
        "/oauth/revoke",
        body=f"token={cli.token}",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert result.status_code == 200, result.text
    _refused(await mcp.request("tools/list"))
    # A token of a registered client still needs its client (RFC 7009 §2.1).
    other = mint_access_token(
        keystore, api_settings, user_id=alice_account, client_id="someone", scope="memory:read"
    )
    unauthenticated = await oauth_http.simulate_post(
        "/oauth/revoke",
        body=f"token={other.token}",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert unauthenticated.status_code == 401
    assert (await Mcp(oauth_http, other.token).request("tools/list")).status_code == 200


async def test_a_token_living_longer_than_the_maximum_is_refused(
    oauth_http: Any, alice_account: int, keystore: KeyStore, api_settings: Any
) -> None:
    limit = api_settings.access_token_max_lifetime_s
    now = time.time()
    within = mint_access_token(
        keystore,
        api_settings,
        user_id=alice_account,
        client_id="c",
        scope="memory:read",
        ttl_s=limit,
        now=now,
    )
    beyond = mint_access_token(
        keystore,
        api_settings,
        user_id=alice_account,
        client_id="c",
        scope="memory:read",
        ttl_s=limit + 1,
        now=now,
    )
    assert (await Mcp(oauth_http, within.token).request("tools/list")).status_code == 200
    _refused(await Mcp(oauth_http, beyond.token).request("tools/list"))
