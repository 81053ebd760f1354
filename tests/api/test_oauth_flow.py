"""The authorization-code flow over HTTP, in-process: the happy paths and their details."""

from __future__ import annotations

from typing import Any

import falcon.testing

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
    parse_form,
    query_of,
    register,
    rows,
    token,
)

__all__ = ["alice_account", "bob_account", "browser", "oauth_clean", "oauth_http", "oauth_options"]


async def test_full_flow_then_mcp(
    oauth_http: Any, browser: Browser, alice_account: int, use_cases: Any
) -> None:
    client = await register(oauth_http)
    code = await authorize(browser, client)
    result = await token(oauth_http, client.token_form(code))
    assert result.status_code == 200, result.text
    assert result.headers["cache-control"] == "no-store"
    assert result.headers["content-type"].startswith("application/json")
    body = result.json
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 3600
    assert body["scope"] == "memory:read memory:write"
    assert body["refresh_token"] and body["access_token"]
    claims = _claims(body["access_token"])
    assert claims["aud"] == "https://mem.example/mcp"
    assert claims["iss"] == "https://mem.example"
    assert claims["sub"] == str(alice_account)
    assert claims["client_id"] == client.client_id

    mcp = Mcp(oauth_http, body["access_token"])
    listed = await mcp.request("tools/list")
    assert listed.status_code == 200 and listed.json["result"]["tools"]
    await mcp.call_tool("recall", {"query": "tea"})
    assert use_cases.calls[-1][1] == alice_account


def _claims(token_value: str) -> dict[str, Any]:
    """The payload of a JWT, unverified (the bearer tests cover signatures)."""
    import base64
    import json

    payload = token_value.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


async def test_login_page_is_plain_accessible_html(
    oauth_http: Any, browser: Browser, alice_account: int
) -> None:
    client = await register(oauth_http)
    page = await browser.get("/oauth/authorize", client.authorization_params())
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    html = page.text
    assert '<html lang="en">' in html and 'name="viewport"' in html
    assert '<label for="username">' in html and '<label for="password">' in html
    assert 'autocomplete="current-password"' in html and "<script" not in html
    assert "Claude" in html
    form = parse_form(html)
    names = {k for k, _ in form["fields"]}
    assert {"username", "password", "csrf_token", "client_id", "code_challenge"} <= names
    csp = page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp
    assert "https://claude.ai" in csp  # form-action must allow the final redirect
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["cache-control"] == "no-store"
    cookie = page.cookies["__Host-ownsona_csrf"]
    assert cookie.http_only and cookie.secure and cookie.same_site.lower() == "lax"


async def test_consent_names_client_scopes_and_destination(
    oauth_http: Any, browser: Browser, alice_account: int
) -> None:
    client = await register(
        oauth_http,
        client_name="ChatGPT",
        redirect_uri="https://chatgpt.com/connector_platform_oauth_redirect",
    )
    page = await browser.get("/oauth/authorize", client.authorization_params())
    consent = await browser.submit(page, username="Alice", password=PASSWORD)
    assert consent.status_code == 200
    assert "Allow ChatGPT to use your memory?" in consent.text
    assert "memory:read" in consent.text and "memory:write" in consent.text
    assert "chatgpt.com" in consent.text and "alice" in consent.text
    session = consent.cookies["__Host-ownsona_session"]
    assert session.http_only and session.secure and session.same_site.lower() == "lax"
    buttons = parse_form(consent.text)["buttons"]
    assert ("decision", "allow") in buttons and ("decision", "deny") in buttons


async def test_deny_returns_access_denied_and_issues_nothing(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    client = await register(oauth_http)
    page = await browser.get("/oauth/authorize", client.authorization_params())
    consent = await browser.submit(page, username="alice", password=PASSWORD)
    denied = await browser.submit(consent, decision="deny")
    assert denied.status_code == 303
    query = query_of(denied.headers["location"])
    assert query["error"] == "access_denied"
    assert query["state"] == client.state and query["iss"] == "https://mem.example"
    assert "code" not in query
    assert count(oauth_clean, "oauth_codes") == 0


async def test_session_skips_password_but_new_client_still_asks_consent(
    oauth_http: Any, browser: Browser, alice_account: int
) -> None:
    first = await register(oauth_http)
    await authorize(browser, first)
    # Same browser, same client: signed in and already allowed: straight back with a code.
    again = await browser.get("/oauth/authorize", first.authorization_params())
    assert again.status_code == 302
    assert query_of(again.headers["location"])["state"] == first.state
    # A new client: no password, but consent.
    second = await register(
        oauth_http, client_name="MCP Inspector", redirect_uri="http://localhost:6274/oauth/callback"
    )
    page = await browser.get("/oauth/authorize", second.authorization_params())
    assert page.status_code == 200
    assert 'name="password"' not in page.text
    assert "Allow MCP Inspector" in page.text
    # prompt=consent asks again even for a known client.
    forced = await browser.get("/oauth/authorize", first.authorization_params(prompt="consent"))
    assert forced.status_code == 200 and "Allow Claude" in forced.text


async def test_scope_defaults_when_absent_and_narrows_when_asked(
    oauth_http: Any, browser: Browser, alice_account: int
) -> None:
    client = await register(oauth_http)
    # ChatGPT omits scope on reconnect: the registered scope applies.
    code = await authorize(browser, client, scope=None, resource=None)
    body = (await token(oauth_http, client.token_form(code, resource=None))).json
    assert body["scope"] == "memory:read memory:write"

    reader = await register(oauth_http, scope="memory:read")
    code = await authorize(browser, reader, scope="memory:read memory:write openid")
    body = (await token(oauth_http, reader.token_form(code))).json
    assert body["scope"] == "memory:read"


async def test_refresh_rotates_and_keeps_working(
    oauth_http: Any, browser: Browser, alice_account: int
) -> None:
    client = await register(oauth_http)
    code = await authorize(browser, client)
    first = (await token(oauth_http, client.token_form(code))).json
    refreshed = await token(
        oauth_http,
        [
            ("grant_type", "refresh_token"),
            ("refresh_token", first["refresh_token"]),
            ("client_id", client.client_id),
            ("resource", "https://mem.example/mcp"),
        ],
    )
    assert refreshed.status_code == 200, refreshed.text
    assert refreshed.headers["cache-control"] == "no-store"
    second = refreshed.json
    assert second["refresh_token"] != first["refresh_token"]
    assert second["access_token"] != first["access_token"]
    narrowed = await token(
        oauth_http,
        [
            ("grant_type", "refresh_token"),
            ("refresh_token", second["refresh_token"]),
            ("client_id", client.client_id),
            ("scope", "memory:read"),
        ],
    )
    assert narrowed.status_code == 200 and narrowed.json["scope"] == "memory:read"
    mcp = Mcp(oauth_http, narrowed.json["access_token"])
    assert (await mcp.request("tools/list")).status_code == 200


async def test_confidential_client_basic_and_post(
    oauth_http: Any, browser: Browser, alice_account: int
) -> None:
    import base64

    basic = await register(oauth_http, token_endpoint_auth_method="client_secret_basic")
    secret = basic.info["client_secret"]
    assert basic.info["client_secret_expires_at"] == 0
    code = await authorize(browser, basic)
    form = [(k, v) for k, v in basic.token_form(code) if k != "client_id"]
    no_secret = await token(oauth_http, basic.token_form(code))
    assert no_secret.status_code == 401 and no_secret.json["error"] == "invalid_client"
    code = await authorize(browser, basic)
    form = [(k, v) for k, v in basic.token_form(code) if k != "client_id"]
    creds = base64.b64encode(f"{basic.client_id}:{secret}".encode()).decode()
    ok = await token(oauth_http, form, Authorization=f"Basic {creds}")
    assert ok.status_code == 200, ok.text
    wrong = base64.b64encode(f"{basic.client_id}:nope".encode()).decode()
    refused = await token(oauth_http, form, Authorization=f"Basic {wrong}")
    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Basic")

    post = await register(oauth_http, token_endpoint_auth_method="client_secret_post")
    code = await authorize(browser, post)
    form = post.token_form(code) + [("client_secret", post.info["client_secret"])]
    assert (await token(oauth_http, form)).status_code == 200


async def test_revoking_a_refresh_token_revokes_its_access_tokens(
    oauth_http: Any, browser: Browser, alice_account: int
) -> None:
    client = await register(oauth_http)
    body = (await token(oauth_http, client.token_form(await authorize(browser, client)))).json
    mcp = Mcp(oauth_http, body["access_token"])
    assert (await mcp.request("tools/list")).status_code == 200
    revoked = await oauth_http.simulate_post(
        "/oauth/revoke",
        body=f"token={body['refresh_token']}&client_id={client.client_id}",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert revoked.status_code == 200
    assert (await mcp.request("tools/list")).status_code == 401
    again = await token(
        oauth_http,
        [
            ("grant_type", "refresh_token"),
            ("refresh_token", body["refresh_token"]),
            ("client_id", client.client_id),
        ],
    )
    assert again.status_code == 400 and again.json["error"] == "invalid_grant"


async def test_revoking_an_access_token_denies_it_at_once(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    client = await register(oauth_http)
    body = (await token(oauth_http, client.token_form(await authorize(browser, client)))).json
    mcp = Mcp(oauth_http, body["access_token"])
    result = await oauth_http.simulate_post(
        "/oauth/revoke",
        body=f"token={body['access_token']}&token_type_hint=access_token&client_id={client.client_id}",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert result.status_code == 200
    denied = await mcp.request("tools/list")
    assert (
        denied.status_code == 401 and 'error="invalid_token"' in denied.headers["www-authenticate"]
    )
    assert count(oauth_clean, "oauth_revoked_tokens") == 1
    # The refresh token still works: only that access token was revoked.
    refreshed = await token(
        oauth_http,
        [
            ("grant_type", "refresh_token"),
            ("refresh_token", body["refresh_token"]),
            ("client_id", client.client_id),
        ],
    )
    assert refreshed.status_code == 200
    # Unknown tokens are accepted silently (RFC 7009 §2.2).
    unknown = await oauth_http.simulate_post(
        "/oauth/revoke",
        body=f"token=nonsense&client_id={client.client_id}",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert unknown.status_code == 200


async def test_restart_keeps_everyone_signed_in(
    api_settings: Any,
    runtime: Any,
    use_cases: Any,
    browser: Browser,
    alice_account: int,
    oauth_http: Any,
    pool: Any,
) -> None:
    """A new app and key store over the same database: tokens and refresh tokens still work."""
    from api.app import create_app
    from api.runtime import Runtime
    from auth.bearer import BearerValidator
    from auth.keys import KeyStore

    client = await register(oauth_http)
    body = (await token(oauth_http, client.token_form(await authorize(browser, client)))).json
    keystore = KeyStore(pool, access_token_ttl_s=api_settings.access_token_ttl_s)
    await keystore.load()
    fresh = Runtime(
        api_settings,
        runtime.deps,
        runtime.write_queue,
        keystore,
        BearerValidator(keystore, api_settings),
    )
    async with falcon.testing.ASGIConductor(create_app(api_settings, runtime=fresh)) as after:
        assert (await Mcp(after, body["access_token"]).request("tools/list")).status_code == 200
        refreshed = await token(
            after,
            [
                ("grant_type", "refresh_token"),
                ("refresh_token", body["refresh_token"]),
                ("client_id", client.client_id),
            ],
        )
        assert refreshed.status_code == 200


async def test_code_expires_after_60_seconds(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    client = await register(oauth_http)
    code = await authorize(browser, client)
    ((lifetime,),) = rows(
        oauth_clean, "SELECT extract(epoch FROM expires_at - created_at) FROM oauth_codes"
    )
    assert 59 <= float(lifetime) <= 61
    rows(oauth_clean, "UPDATE oauth_codes SET expires_at = now() - interval '1 second' RETURNING 1")
    result = await token(oauth_http, client.token_form(code))
    assert result.status_code == 400 and result.json["error"] == "invalid_grant"
    assert count(oauth_clean, "oauth_refresh_tokens") == 0
