"""Attacks on the authorization server: each is refused, and nothing is issued."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey

from tests.api.conftest import Mcp
from tests.auth.oauth_flow import (
    PASSWORD,
    Browser,
    alice_account,
    authorize,
    bob_account,
    browser,
    count,
    oauth_clean,
    oauth_http,
    oauth_options,
    query_of,
    register,
    rows,
    token,
)

__all__ = ["alice_account", "bob_account", "browser", "oauth_clean", "oauth_http", "oauth_options"]


def _nothing_issued(dsn: str) -> None:
    assert count(dsn, "oauth_grants") == 0
    assert count(dsn, "oauth_refresh_tokens") == 0


def _refresh_form(client_id: str, refresh_token: str) -> list[tuple[str, str]]:
    return [
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token),
        ("client_id", client_id),
    ]


# --- PKCE ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {"code_challenge": None, "code_challenge_method": None},  # PKCE missing
        {"code_challenge_method": "plain"},  # plain refused
        {"code_challenge_method": None},  # would default to plain
        {"code_challenge": "short"},
    ],
)
async def test_pkce_missing_or_plain_is_refused(
    oauth_http: Any,
    browser: Browser,
    alice_account: int,
    oauth_clean: str,
    overrides: dict[str, Any],
) -> None:
    client = await register(oauth_http)
    params = client.authorization_params(**overrides)
    result = await browser.get("/oauth/authorize", params)
    assert result.status_code == 302
    query = query_of(result.headers["location"])
    assert query["error"] == "invalid_request" and "code" not in query
    assert query["state"] == client.state and query["iss"] == "https://mem.example"
    assert count(oauth_clean, "oauth_codes") == 0


async def test_wrong_or_missing_verifier_is_refused(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    client = await register(oauth_http)
    code = await authorize(browser, client)
    wrong = await token(oauth_http, client.token_form(code, code_verifier="x" * 64))
    assert wrong.status_code == 400 and wrong.json["error"] == "invalid_grant"
    # The code is burnt by the failed attempt: the right verifier no longer helps.
    late = await token(oauth_http, client.token_form(code))
    assert late.status_code == 400 and late.json["error"] == "invalid_grant"
    code = await authorize(browser, client)
    missing = await token(oauth_http, client.token_form(code, code_verifier=None))
    assert missing.status_code == 400 and missing.json["error"] == "invalid_grant"
    _nothing_issued(oauth_clean)


# --- codes -----------------------------------------------------------------------------


async def test_code_replay_is_refused_and_revokes_what_it_issued(
    oauth_http: Any, browser: Browser, alice_account: int
) -> None:
    client = await register(oauth_http)
    code = await authorize(browser, client)
    first = await token(oauth_http, client.token_form(code))
    assert first.status_code == 200
    tokens = first.json
    mcp = Mcp(oauth_http, tokens["access_token"])
    assert (await mcp.request("tools/list")).status_code == 200

    replay = await token(oauth_http, client.token_form(code))
    assert replay.status_code == 400 and replay.json["error"] == "invalid_grant"
    assert "access_token" not in replay.json
    assert (await mcp.request("tools/list")).status_code == 401
    refreshed = await token(oauth_http, _refresh_form(client.client_id, tokens["refresh_token"]))
    assert refreshed.status_code == 400 and refreshed.json["error"] == "invalid_grant"


async def test_code_of_another_client_is_refused(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    victim = await register(oauth_http)
    thief = await register(oauth_http, client_name="Thief")
    code = await authorize(browser, victim)
    stolen = await token(
        oauth_http,
        [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("client_id", thief.client_id),
            ("redirect_uri", victim.redirect_uri),
            ("code_verifier", victim.verifier),
        ],
    )
    assert stolen.status_code == 400 and stolen.json["error"] == "invalid_grant"
    _nothing_issued(oauth_clean)


async def test_code_with_another_redirect_uri_is_refused(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    client = await register(
        oauth_http,
        redirect_uri="https://claude.ai/api/mcp/auth_callback",
        redirect_uris=[
            "https://claude.ai/api/mcp/auth_callback",
            "https://claude.com/api/mcp/auth_callback",
        ],
    )
    code = await authorize(browser, client)
    other = await token(
        oauth_http, client.token_form(code, redirect_uri="https://claude.com/api/mcp/auth_callback")
    )
    assert other.status_code == 400 and other.json["error"] == "invalid_grant"
    _nothing_issued(oauth_clean)


async def test_code_for_another_resource_is_refused(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    client = await register(oauth_http)
    code = await authorize(browser, client)
    other = await token(oauth_http, client.token_form(code, resource="https://evil.example/mcp"))
    assert other.status_code == 400 and other.json["error"] == "invalid_target"
    _nothing_issued(oauth_clean)


@pytest.mark.parametrize(
    "redirect_uri",
    [
        "https://evil.example/callback",
        "https://claude.ai/api/mcp/auth_callback/../evil",
        "https://claude.ai/api/mcp/auth_callback?x=1",
        "https://CLAUDE.ai/api/mcp/auth_callback",
        None,
    ],
)
async def test_unregistered_redirect_uri_gets_an_error_page_not_a_redirect(
    oauth_http: Any,
    browser: Browser,
    alice_account: int,
    oauth_clean: str,
    redirect_uri: str | None,
) -> None:
    client = await register(oauth_http)
    result = await browser.get(
        "/oauth/authorize", client.authorization_params(redirect_uri=redirect_uri)
    )
    assert result.status_code == 400
    assert "location" not in result.headers
    assert result.headers["content-type"].startswith("text/html")
    assert "cannot continue" in result.text
    assert count(oauth_clean, "oauth_codes") == 0


async def test_unknown_client_gets_an_error_page(
    oauth_http: Any, browser: Browser, alice_account: int
) -> None:
    client = await register(oauth_http)
    result = await browser.get("/oauth/authorize", client.authorization_params(client_id="nope"))
    assert result.status_code == 400 and "location" not in result.headers
    assert "not registered" in result.text


async def test_foreign_resource_is_invalid_target(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    client = await register(oauth_http)
    result = await browser.get(
        "/oauth/authorize", client.authorization_params(resource="https://other.example/mcp")
    )
    assert result.status_code == 302
    assert query_of(result.headers["location"])["error"] == "invalid_target"
    assert count(oauth_clean, "oauth_codes") == 0


# --- refresh tokens ---------------------------------------------------------------------


async def test_refresh_token_reuse_revokes_the_whole_family(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    client = await register(oauth_http)
    first = (await token(oauth_http, client.token_form(await authorize(browser, client)))).json
    second = (await token(oauth_http, _refresh_form(client.client_id, first["refresh_token"]))).json
    assert second["refresh_token"] != first["refresh_token"]
    # Past the grace window (tests/api/test_refresh_grace.py covers the window itself).
    rows(
        oauth_clean,
        "UPDATE oauth_refresh_tokens SET rotated_at = rotated_at - interval '1 hour' RETURNING 1",
    )

    # The rotated-out token comes back (say, stolen): refused, and the family dies.
    reuse = await token(oauth_http, _refresh_form(client.client_id, first["refresh_token"]))
    assert reuse.status_code == 400 and reuse.json["error"] == "invalid_grant"
    assert "access_token" not in reuse.json
    newest = await token(oauth_http, _refresh_form(client.client_id, second["refresh_token"]))
    assert newest.status_code == 400 and newest.json["error"] == "invalid_grant"
    for tokens in (first, second):
        result = await Mcp(oauth_http, tokens["access_token"]).request("tools/list")
        assert result.status_code == 401


async def test_refresh_token_of_another_client_is_refused(
    oauth_http: Any, browser: Browser, alice_account: int
) -> None:
    client = await register(oauth_http)
    thief = await register(oauth_http, client_name="Thief")
    tokens = (await token(oauth_http, client.token_form(await authorize(browser, client)))).json
    stolen = await token(oauth_http, _refresh_form(thief.client_id, tokens["refresh_token"]))
    assert stolen.status_code == 400 and stolen.json["error"] == "invalid_grant"
    widened = await token(
        oauth_http,
        _refresh_form(client.client_id, tokens["refresh_token"]) + [("scope", "memory:read admin")],
    )
    assert widened.status_code == 400 and widened.json["error"] == "invalid_scope"


# --- access tokens ------------------------------------------------------------------------


def _b64(data: dict[str, Any]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {
        "iss": "https://mem.example",
        "aud": "https://mem.example/mcp",
        "sub": "1",
        "client_id": "c",
        "scope": "memory:read memory:write",
        "iat": now,
        "exp": now + 600,
        "jti": "j",
    }
    claims.update(changes)
    return claims


async def _forged(kind: str, keystore: Any) -> str:
    key = keystore.signing_key()
    header = {"alg": "RS256", "kid": key.kid, "typ": "at+jwt"}
    if kind == "alg_none":
        return f"{_b64({'alg': 'none', 'typ': 'at+jwt', 'kid': key.kid})}.{_b64(_claims())}."
    if kind == "wrong_signature":
        other = RSAKey.generate_key(2048)
        return jwt.encode(header, _claims(), other)
    if kind == "unknown_kid":
        other = RSAKey.generate_key(2048, auto_kid=True)
        return jwt.encode({**header, "kid": other.kid}, _claims(), other)
    if kind == "wrong_aud":
        return jwt.encode(header, _claims(aud="https://other.example/mcp"), key)
    if kind == "wrong_iss":
        return jwt.encode(header, _claims(iss="https://evil.example"), key)
    if kind == "expired":
        past = int(time.time()) - 3600
        return jwt.encode(header, _claims(iat=past - 600, exp=past), key)
    if kind == "hs256_with_public_key":
        from joserfc.jwk import OctKey

        public = json.dumps(key.as_dict(private=False)).encode()
        return jwt.encode(
            {**header, "alg": "HS256"}, _claims(), OctKey.import_key(public), algorithms=["HS256"]
        )
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind",
    [
        "alg_none",
        "wrong_signature",
        "unknown_kid",
        "wrong_aud",
        "wrong_iss",
        "expired",
        "hs256_with_public_key",
    ],
)
async def test_forged_access_tokens_are_refused(
    oauth_http: Any, keystore: Any, alice_account: int, use_cases: Any, kind: str
) -> None:
    forged = await _forged(kind, keystore)
    call = {"name": "recall", "arguments": {"query": "x"}}
    result = await Mcp(oauth_http, forged).request("tools/call", call)
    assert result.status_code == 401
    assert 'error="invalid_token"' in result.headers["www-authenticate"]
    assert use_cases.calls == []


# --- the sign-in form ------------------------------------------------------------------------


async def test_login_without_csrf_token_is_refused(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    client = await register(oauth_http)
    page = await browser.get("/oauth/authorize", client.authorization_params())
    refused = await browser.submit(page, drop=("csrf_token",), username="alice", password=PASSWORD)
    assert refused.status_code == 403
    assert "__Host-ownsona_session" not in refused.cookies
    assert "location" not in refused.headers
    assert count(oauth_clean, "oauth_sessions") == 0
    forged = await browser.submit(page, username="alice", password=PASSWORD, csrf_token="guess" * 9)
    assert forged.status_code == 403 and count(oauth_clean, "oauth_sessions") == 0
    # Without the cookie (a cross-site post cannot read it) the field alone is not enough.
    browser.cookies.clear()
    no_cookie = await browser.submit(page, username="alice", password=PASSWORD)
    assert no_cookie.status_code == 403 and count(oauth_clean, "oauth_sessions") == 0
    assert count(oauth_clean, "oauth_codes") == 0


async def test_consent_without_csrf_token_is_refused(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    client = await register(oauth_http)
    page = await browser.get("/oauth/authorize", client.authorization_params())
    consent = await browser.submit(page, username="alice", password=PASSWORD)
    refused = await browser.submit(consent, drop=("csrf_token",), decision="allow")
    assert refused.status_code == 403 and "location" not in refused.headers
    assert count(oauth_clean, "oauth_codes") == 0


async def test_cross_site_form_post_is_refused(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    from tests.auth.oauth_flow import parse_form

    client = await register(oauth_http)
    page = await browser.get("/oauth/authorize", client.authorization_params())
    form = parse_form(page.text)
    fields = [(k, v) for k, v in form["fields"] if k not in ("username", "password")]
    fields += [("username", "alice"), ("password", PASSWORD)]
    result = await browser.post_form(form["action"], fields, {"Origin": "https://evil.example"})
    assert result.status_code == 403 and count(oauth_clean, "oauth_sessions") == 0


async def test_unknown_user_and_wrong_password_look_the_same(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    client = await register(oauth_http)
    page = await browser.get("/oauth/authorize", client.authorization_params())
    wrong = await browser.submit(page, username="alice", password="not the password")
    unknown = await browser.submit(page, username="mallory", password="not the password")
    assert wrong.status_code == unknown.status_code == 400
    assert "Incorrect username or password." in wrong.text
    assert wrong.text.replace("alice", "X") == unknown.text.replace("mallory", "X")
    assert count(oauth_clean, "oauth_sessions") == 0 and count(oauth_clean, "oauth_codes") == 0


# --- one user's token never reaches another user's memories ----------------------------------


async def test_token_of_alice_acts_only_as_alice(
    oauth_http: Any, browser: Browser, alice_account: int, bob_account: int, use_cases: Any
) -> None:
    client = await register(oauth_http)
    alice_tokens = (
        await token(oauth_http, client.token_form(await authorize(browser, client)))
    ).json
    bob_browser = Browser(oauth_http)
    bob_tokens = (
        await token(
            oauth_http,
            client.token_form(
                await authorize(
                    bob_browser, client, username="bob", password="bob's own long password"
                )
            ),
        )
    ).json
    await Mcp(oauth_http, alice_tokens["access_token"]).call_tool("list_memories", {})
    await Mcp(oauth_http, bob_tokens["access_token"]).call_tool("list_memories", {})
    assert [c[1] for c in use_cases.calls] == [alice_account, bob_account]
