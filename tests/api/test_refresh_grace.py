"""The refresh-token grace window (OAUTH_REFRESH_GRACE_SECONDS), over HTTP, on real PostgreSQL.

A client that refreshes in parallel (claude.ai, from two egress addresses)
presents one refresh token several times. Within the window each request
gets a working token pair of the same family; after it, reuse revokes the
family as before; with the window at 0, reuse revokes at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from auth.opaque import digest
from auth.refresh_seal import seal, unseal
from config.settings import Settings
from tests.api.conftest import PUBLIC_URL, Mcp
from tests.auth.oauth_flow import (
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


@pytest.fixture
def grace() -> int:
    return 60


@pytest.fixture
def api_settings(grace: int) -> Settings:
    return Settings(
        public_url=PUBLIC_URL, max_body_bytes=4096, max_batch_size=5, oauth_refresh_grace_s=grace
    )


def _refresh_form(client_id: str, refresh_token: str, **extra: str) -> list[tuple[str, str]]:
    form = [
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token),
        ("client_id", client_id),
    ]
    return form + list(extra.items())


async def _refresh(oauth_http: Any, client_id: str, refresh_token: str, **extra: str) -> Any:
    return await token(oauth_http, _refresh_form(client_id, refresh_token, **extra))


async def _status_at_mcp(oauth_http: Any, access_token: str) -> int:
    return (await Mcp(oauth_http, access_token).request("tools/list")).status_code


def _live_refresh_tokens(dsn: str) -> int:
    """Refresh tokens that would still be accepted as live: not rotated, grant not revoked."""
    return int(
        rows(
            dsn,
            "SELECT count(*) FROM oauth_refresh_tokens t JOIN oauth_grants g ON g.id = t.grant_id"
            " WHERE t.rotated_at IS NULL AND g.revoked_at IS NULL AND t.expires_at > now()",
        )[0][0]
    )


def _live_grants(dsn: str) -> int:
    return int(rows(dsn, "SELECT count(*) FROM oauth_grants WHERE revoked_at IS NULL")[0][0])


def _age_rotations(dsn: str, seconds: int) -> None:
    """Move every rotation back in time: the window closes without waiting for it."""
    rows(
        dsn,
        "UPDATE oauth_refresh_tokens SET rotated_at = rotated_at - make_interval(secs => %s)"
        " WHERE rotated_at IS NOT NULL RETURNING 1",
        seconds,
    )


async def _first_pair(oauth_http: Any, browser: Browser) -> tuple[Any, dict[str, Any]]:
    client = await register(oauth_http)
    issued = await token(oauth_http, client.token_form(await authorize(browser, client)))
    assert issued.status_code == 200, issued.text
    return client, issued.json


async def test_five_parallel_refreshes_with_one_token_all_succeed_in_one_family(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    client, first = await _first_pair(oauth_http, browser)

    answers = await asyncio.gather(
        *(_refresh(oauth_http, client.client_id, first["refresh_token"]) for _ in range(5))
    )

    assert [a.status_code for a in answers] == [200] * 5, [a.text for a in answers]
    bodies = [a.json for a in answers]
    # Every answer hands out the one live refresh token: the family does not fork.
    assert len({b["refresh_token"] for b in bodies}) == 1
    assert bodies[0]["refresh_token"] != first["refresh_token"]
    assert len({b["access_token"] for b in bodies}) == 5
    assert _live_grants(oauth_clean) == 1
    assert _live_refresh_tokens(oauth_clean) == 1
    for body in [first, *bodies]:
        assert await _status_at_mcp(oauth_http, body["access_token"]) == 200

    # The live token rotates as usual afterwards.
    onward = await _refresh(oauth_http, client.client_id, bodies[0]["refresh_token"])
    assert onward.status_code == 200, onward.text
    assert onward.json["refresh_token"] not in {first["refresh_token"], bodies[0]["refresh_token"]}
    assert _live_refresh_tokens(oauth_clean) == 1


async def test_a_replay_follows_later_rotations_to_the_live_token(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    client, first = await _first_pair(oauth_http, browser)
    second = (await _refresh(oauth_http, client.client_id, first["refresh_token"])).json
    third = (await _refresh(oauth_http, client.client_id, second["refresh_token"])).json

    # The first token, again within its window: the family has moved on twice since.
    replay = await _refresh(oauth_http, client.client_id, first["refresh_token"])
    assert replay.status_code == 200, replay.text
    assert replay.json["refresh_token"] == third["refresh_token"]
    assert await _status_at_mcp(oauth_http, replay.json["access_token"]) == 200
    assert _live_refresh_tokens(oauth_clean) == 1


async def test_a_replay_may_narrow_the_scope_but_not_widen_it(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    client, first = await _first_pair(oauth_http, browser)
    second = (await _refresh(oauth_http, client.client_id, first["refresh_token"])).json

    narrowed = await _refresh(
        oauth_http, client.client_id, first["refresh_token"], scope="memory:read"
    )
    assert narrowed.status_code == 200 and narrowed.json["scope"] == "memory:read"
    assert narrowed.json["refresh_token"] == second["refresh_token"]
    widened = await _refresh(
        oauth_http, client.client_id, first["refresh_token"], scope="memory:read admin"
    )
    assert widened.status_code == 400 and widened.json["error"] == "invalid_scope"
    assert _live_grants(oauth_clean) == 1


async def test_reuse_after_the_window_revokes_the_family(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    client, first = await _first_pair(oauth_http, browser)
    second = (await _refresh(oauth_http, client.client_id, first["refresh_token"])).json
    in_window = (await _refresh(oauth_http, client.client_id, first["refresh_token"])).json
    _age_rotations(oauth_clean, 61)

    reuse = await _refresh(oauth_http, client.client_id, first["refresh_token"])
    assert reuse.status_code == 400 and reuse.json["error"] == "invalid_grant"
    assert "access_token" not in reuse.json
    assert _live_grants(oauth_clean) == 0
    newest = await _refresh(oauth_http, client.client_id, second["refresh_token"])
    assert newest.status_code == 400 and newest.json["error"] == "invalid_grant"
    # Every access token of the family is refused, the one issued on the replay included.
    for body in (first, second, in_window):
        assert await _status_at_mcp(oauth_http, body["access_token"]) == 401


async def test_a_token_presented_by_another_client_is_refused_and_revokes_nothing(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    client, first = await _first_pair(oauth_http, browser)
    thief = await register(oauth_http, client_name="Thief")
    second = (await _refresh(oauth_http, client.client_id, first["refresh_token"])).json

    stolen = await _refresh(oauth_http, thief.client_id, first["refresh_token"])
    assert stolen.status_code == 400 and stolen.json["error"] == "invalid_grant"
    assert "access_token" not in stolen.json
    assert _live_grants(oauth_clean) == 1
    assert await _status_at_mcp(oauth_http, second["access_token"]) == 200


@pytest.mark.parametrize("grace", [0])
async def test_with_the_window_off_reuse_revokes_at_once(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str, grace: int
) -> None:
    client, first = await _first_pair(oauth_http, browser)
    second = (await _refresh(oauth_http, client.client_id, first["refresh_token"])).json

    reuse = await _refresh(oauth_http, client.client_id, first["refresh_token"])
    assert reuse.status_code == 400 and reuse.json["error"] == "invalid_grant"
    assert _live_grants(oauth_clean) == 0 and _live_refresh_tokens(oauth_clean) == 0
    for body in (first, second):
        assert await _status_at_mcp(oauth_http, body["access_token"]) == 401


@pytest.mark.parametrize("grace", [0])
async def test_with_the_window_off_parallel_refreshes_revoke_the_family(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str, grace: int
) -> None:
    client, first = await _first_pair(oauth_http, browser)
    answers = await asyncio.gather(
        *(_refresh(oauth_http, client.client_id, first["refresh_token"]) for _ in range(5))
    )
    # One wins the row lock and rotates; the four after it are reuse, as before the window.
    assert sorted(a.status_code for a in answers) == [200, 400, 400, 400, 400]
    assert _live_grants(oauth_clean) == 0


async def test_the_database_keeps_no_refresh_token_in_the_clear(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    client, first = await _first_pair(oauth_http, browser)
    second = (await _refresh(oauth_http, client.client_id, first["refresh_token"])).json
    ((sealed, successor_hash),) = rows(
        oauth_clean,
        "SELECT successor_sealed, successor_hash FROM oauth_refresh_tokens WHERE token_hash = %s",
        digest(first["refresh_token"]),
    )
    assert successor_hash == digest(second["refresh_token"])
    assert second["refresh_token"].encode() not in bytes(sealed)
    holder_hash = digest(first["refresh_token"])
    assert unseal(first["refresh_token"], holder_hash, bytes(sealed)) == second["refresh_token"]
    assert unseal(second["refresh_token"], holder_hash, bytes(sealed)) is None


def test_a_seal_opens_only_with_its_holder_and_its_row() -> None:
    box = seal("holder-token", "holder-hash", "successor-token")
    assert unseal("holder-token", "holder-hash", box) == "successor-token"
    assert unseal("other-token", "holder-hash", box) is None
    assert unseal("holder-token", "other-hash", box) is None
    tampered = box[:-1] + bytes([box[-1] ^ 1])
    assert unseal("holder-token", "holder-hash", tampered) is None
    assert unseal("holder-token", "holder-hash", b"short") is None
