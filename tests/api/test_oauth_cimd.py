"""Client ID Metadata Documents over HTTP, in-process: the published clients' flows and the attacks.

The documents come from a real local HTTPS server (``tests/auth/cimd_server.py``)
through the real fetcher; every attack is refused with nothing issued: no
code, no grant, no token row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode, urlsplit

import falcon.testing
import pytest

from api.app import create_app
from auth.metadata_fetch import MetadataFetcher
from tests.auth.assertion_keys import ClientKey
from tests.auth.cimd_server import (
    CHATGPT_PATH,
    CLAUDE_AI_PATH,
    CLAUDE_CODE_PATH,
    DocumentServer,
    Route,
    chatgpt_document,
    claude_ai_document,
    claude_code_document,
    document_server,
    fetcher,
    test_ca,
)
from tests.auth.oauth_flow import (
    PASSWORD,
    Browser,
    Client,
    alice_account,
    authorize,
    count,
    oauth_clean,
    oauth_options,
    query_of,
    register,
    rows,
    token,
)

__all__ = [
    "alice_account",
    "document_server",
    "fetcher",
    "oauth_clean",
    "oauth_options",
    "test_ca",
]

CLAUDE_CALLBACK = "https://claude.ai/api/mcp/auth_callback"
CHATGPT_CALLBACK = "https://chatgpt.com/connector_platform_oauth_redirect"
TOKEN_ENDPOINT = "https://mem.example/oauth/token"
ISSUED = ("oauth_codes", "oauth_grants", "oauth_refresh_tokens")


@pytest.fixture
async def cimd_http(
    api_settings: Any,
    runtime: Any,
    use_cases: Any,
    oauth_options: Any,
    oauth_clean: str,
    fetcher: MetadataFetcher,
) -> AsyncIterator[falcon.testing.ASGIConductor]:
    """The app with the real OAuth server and a fetcher that reaches the local HTTPS server."""
    app = create_app(
        api_settings,
        runtime=dataclasses.replace(
            dataclasses.replace(runtime, metadata_fetcher=fetcher),
            run_inline=use_cases,
            oauth_options=oauth_options,
        ),
    )
    async with falcon.testing.ASGIConductor(app) as conductor:
        yield conductor


@pytest.fixture
def browser(cimd_http: falcon.testing.ASGIConductor) -> Browser:
    return Browser(cimd_http)


def nothing_issued(dsn: str) -> bool:
    return all(count(dsn, table) == 0 for table in ISSUED)


async def _signed_in(browser: Browser, client: Client) -> falcon.testing.Result:
    """Sign in on the client's authorization request; the page after (the consent page)."""
    page = await browser.get("/oauth/authorize", client.authorization_params())
    assert page.status_code == 200 and 'name="password"' in page.text, page.text[:1500]
    return await browser.submit(page, username="alice", password=PASSWORD)


# -- the published clients' flows ----------------------------------------------------------


async def test_claude_ai_connects_with_its_metadata_document(
    cimd_http: Any,
    browser: Browser,
    alice_account: int,
    oauth_clean: str,
    document_server: DocumentServer,
) -> None:
    url = document_server.url("claude.ai", CLAUDE_AI_PATH)
    document_server.serve_json(
        CLAUDE_AI_PATH, claude_ai_document(url), {"Cache-Control": "max-age=600"}
    )
    client = Client({"client_id": url}, CLAUDE_CALLBACK)

    login = await browser.get("/oauth/authorize", client.authorization_params())
    assert "Sign in to connect Claude" in login.text
    assert f"<strong>claude.ai:{document_server.port}</strong>" in login.text
    consent = await browser.submit(login, username="alice", password=PASSWORD)
    assert consent.status_code == 200
    assert "Allow Claude to use your memory?" in consent.text
    assert (
        f"identifies itself from <strong>claude.ai:{document_server.port}</strong>" in consent.text
    )
    assert "program on this computer" not in consent.text  # a web redirect: no localhost warning
    done = await browser.submit(consent, decision="allow")
    assert done.status_code == 303
    code = query_of(done.headers["location"])["code"]

    result = await token(cimd_http, client.token_form(code))
    assert result.status_code == 200, result.text
    body = result.json
    assert body["refresh_token"] and body["scope"] == "memory:read memory:write"
    assert rows(oauth_clean, "SELECT client_id FROM oauth_grants") == [(url,)]
    refreshed = await token(
        cimd_http,
        [
            ("grant_type", "refresh_token"),
            ("refresh_token", body["refresh_token"]),
            ("client_id", url),
        ],
    )
    assert refreshed.status_code == 200, refreshed.text
    # The document was fetched once: the token and refresh requests used the cached copy.
    assert document_server.hits[CLAUDE_AI_PATH] == 1

    # claude.com is the document's second redirect URI; consent is remembered per client_id.
    other = Client({"client_id": url}, "https://claude.com/api/mcp/auth_callback")
    page = await browser.get("/oauth/authorize", other.authorization_params())
    assert page.status_code == 302, page.text[:1000]
    assert page.headers["location"].startswith("https://claude.com/api/mcp/auth_callback?code=")


async def test_claude_code_uses_an_ephemeral_loopback_port(
    cimd_http: Any,
    browser: Browser,
    alice_account: int,
    oauth_clean: str,
    document_server: DocumentServer,
) -> None:
    url = document_server.url("claude.ai", CLAUDE_CODE_PATH)
    document_server.serve_json(CLAUDE_CODE_PATH, claude_code_document(url))
    client = Client({"client_id": url}, "http://localhost:54123/callback")
    consent = await _signed_in(browser, client)
    assert "Allow Claude Code" in consent.text
    assert "program on this computer" in consent.text  # the localhost warning
    done = await browser.submit(consent, decision="allow")
    code = query_of(done.headers["location"])["code"]
    assert done.headers["location"].startswith("http://localhost:54123/callback?")
    # The token request must repeat the port it authorized with.
    wrong_port = await token(
        cimd_http, client.token_form(code, redirect_uri="http://localhost:54124/callback")
    )
    assert wrong_port.status_code == 400 and wrong_port.json["error"] == "invalid_grant"
    assert count(oauth_clean, "oauth_grants") == 0

    again = Client({"client_id": url}, "http://127.0.0.1:60001/callback")
    code = await authorize(browser, again)
    result = await token(cimd_http, again.token_form(code))
    assert result.status_code == 200, result.text


async def test_chatgpt_authenticates_with_private_key_jwt(
    cimd_http: Any,
    browser: Browser,
    alice_account: int,
    oauth_clean: str,
    document_server: DocumentServer,
) -> None:
    key = ClientKey("RS256")
    url = document_server.url("chatgpt.com", CHATGPT_PATH)
    document_server.serve_json(CHATGPT_PATH, chatgpt_document(url, jwks=key.jwks()))
    client = Client({"client_id": url}, CHATGPT_CALLBACK)
    code = await authorize(browser, client)

    def with_assertion(assertion: str | None, **form: str | None) -> list[tuple[str, str]]:
        fields = client.token_form(code, **form)
        if assertion is not None:
            fields += [
                ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                ("client_assertion", assertion),
            ]
        return fields

    refusals = {
        "no assertion": with_assertion(None),
        "wrong aud": with_assertion(key.sign(url, "https://other.example/oauth/token")),
        "expired": with_assertion(
            key.sign(url, TOKEN_ENDPOINT, exp=1_700_000_000, iat=1_699_999_900)
        ),
        "another key": with_assertion(ClientKey("RS256").sign(url, TOKEN_ENDPOINT)),
        "iss of another client": with_assertion(
            key.sign(url, TOKEN_ENDPOINT, iss="https://evil.example/c")
        ),
        "a secret too": with_assertion(key.sign(url, TOKEN_ENDPOINT), client_secret="x"),
    }
    for name, form in refusals.items():
        refused = await token(cimd_http, form)
        assert refused.status_code in (400, 401), (name, refused.text)
        assert refused.json["error"] in ("invalid_client", "invalid_request"), name
        assert count(oauth_clean, "oauth_grants") == 0, name

    # client_id may be left out: the assertion names the client (RFC 7521 §4.2).
    assertion = key.sign(url, TOKEN_ENDPOINT)
    result = await token(cimd_http, with_assertion(assertion, client_id=None))
    assert result.status_code == 200, result.text
    refresh_token = result.json["refresh_token"]
    issued = count(oauth_clean, "oauth_refresh_tokens")

    # The same assertion again (a replay) is refused, and issues nothing.
    replay = await token(
        cimd_http,
        [
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
            ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
            ("client_assertion", assertion),
        ],
    )
    assert replay.status_code == 401 and replay.json["error"] == "invalid_client"
    assert "already used" in replay.json["error_description"]
    assert count(oauth_clean, "oauth_refresh_tokens") == issued
    assert rows(oauth_clean, "SELECT count(*) FROM oauth_client_assertions") == [(1,)]
    # A fresh assertion (here naming our issuer as audience) refreshes.
    fresh = await token(
        cimd_http,
        [
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
            ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
            ("client_assertion", key.sign(url, "https://mem.example")),
        ],
    )
    assert fresh.status_code == 200, fresh.text


async def test_private_key_jwt_keys_from_jwks_uri_follow_a_rotation(
    cimd_http: Any,
    browser: Browser,
    alice_account: int,
    oauth_clean: str,
    document_server: DocumentServer,
) -> None:
    old, new = ClientKey("ES256", kid="2025"), ClientKey("ES256", kid="2026")
    url = document_server.url("chatgpt.com", CHATGPT_PATH)
    jwks_uri = document_server.url("chatgpt.com", "/jwks.json")
    document_server.serve_json(CHATGPT_PATH, chatgpt_document(url, jwks_uri=jwks_uri))
    document_server.serve_json("/jwks.json", old.jwks(), {"Cache-Control": "max-age=3600"})
    client = Client({"client_id": url}, CHATGPT_CALLBACK)
    code = await authorize(browser, client)
    # Cached with the old key; the client rotated: the unknown kid makes us fetch again, once.
    document_server.serve_json("/jwks.json", new.jwks(), {"Cache-Control": "max-age=3600"})
    fields = client.token_form(code) + [
        ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
        ("client_assertion", new.sign(url, TOKEN_ENDPOINT)),
    ]
    result = await token(cimd_http, fields)
    assert result.status_code == 200, result.text
    assert document_server.hits["/jwks.json"] == 1  # the authorize request fetched no keys
    refused = old.sign(url, TOKEN_ENDPOINT)
    bad = await token(
        cimd_http,
        [
            ("grant_type", "refresh_token"),
            ("refresh_token", result.json["refresh_token"]),
            ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
            ("client_assertion", refused),
        ],
    )
    assert bad.status_code == 401, bad.text


# -- attacks at /oauth/authorize: an error page, nothing sent to the client, nothing issued ----


async def _refused_page(
    browser: Browser, client_id: str, redirect_uri: str = CLAUDE_CALLBACK
) -> str:
    client = Client({"client_id": client_id}, redirect_uri)
    page = await browser.get("/oauth/authorize", client.authorization_params())
    assert page.status_code == 400, page.text[:1500]
    assert "location" not in page.headers
    assert 'name="password"' not in page.text
    return page.text


async def test_a_document_naming_another_client_id_is_refused(
    browser: Browser, alice_account: int, oauth_clean: str, document_server: DocumentServer
) -> None:
    url = document_server.url("evil.example", CLAUDE_AI_PATH)
    # evil.example serves claude.ai's document, claiming to be claude.ai's client.
    document_server.serve_json(
        CLAUDE_AI_PATH, claude_ai_document(document_server.url("claude.ai", CLAUDE_AI_PATH))
    )
    text = await _refused_page(browser, url)
    assert "client_id is not exactly the URL" in text
    assert nothing_issued(oauth_clean) and count(oauth_clean, "oauth_clients") == 0


async def test_an_http_client_id_is_refused(
    browser: Browser, alice_account: int, oauth_clean: str, document_server: DocumentServer
) -> None:
    url = f"http://claude.ai:{document_server.port}{CLAUDE_AI_PATH}"
    await _refused_page(browser, url)
    assert document_server.hits[CLAUDE_AI_PATH] == 0
    assert nothing_issued(oauth_clean)


@pytest.mark.parametrize(
    "host", ["internal.example", "metadata.example", "10.0.0.1", "mapped.example"]
)
async def test_a_client_id_resolving_to_an_internal_address_is_refused(
    browser: Browser,
    alice_account: int,
    oauth_clean: str,
    document_server: DocumentServer,
    host: str,
) -> None:
    text = await _refused_page(browser, f"https://{host}:{document_server.port}{CLAUDE_AI_PATH}")
    assert "which is never fetched" in text
    assert document_server.hits[CLAUDE_AI_PATH] == 0
    assert nothing_issued(oauth_clean)


async def test_a_redirecting_document_is_refused(
    browser: Browser, alice_account: int, oauth_clean: str, document_server: DocumentServer
) -> None:
    target = document_server.url("claude.ai", "/real.json")
    document_server.routes[CLAUDE_AI_PATH] = Route(302, b"", {"Location": target})
    document_server.serve_json("/real.json", claude_ai_document(target))
    text = await _refused_page(browser, document_server.url("claude.ai", CLAUDE_AI_PATH))
    assert "redirect (302), never followed" in text
    assert document_server.hits["/real.json"] == 0
    assert nothing_issued(oauth_clean)


async def test_an_oversized_document_is_refused(
    browser: Browser, alice_account: int, oauth_clean: str, document_server: DocumentServer
) -> None:
    url = document_server.url("claude.ai", CLAUDE_AI_PATH)
    big = {**claude_ai_document(url), "padding": "x" * 70_000}
    document_server.serve_json(CLAUDE_AI_PATH, big)
    document_server.routes[CLAUDE_AI_PATH].declare_length = False
    text = await _refused_page(browser, url)
    assert "larger than 65536 bytes" in text
    assert nothing_issued(oauth_clean)


async def test_a_redirect_uri_not_in_the_document_is_refused(
    browser: Browser, alice_account: int, oauth_clean: str, document_server: DocumentServer
) -> None:
    url = document_server.url("claude.ai", CLAUDE_AI_PATH)
    document_server.serve_json(CLAUDE_AI_PATH, claude_ai_document(url))
    for attempt in (
        "https://evil.example/api/mcp/auth_callback",
        "https://claude.ai/api/mcp/auth_callback/../../evil",
        "https://claude.ai:8443/api/mcp/auth_callback",
        "http://localhost:5555/callback",  # loopback, but not one this document lists
        CLAUDE_CALLBACK + "\n",  # never normalised into a match
        " " + CLAUDE_CALLBACK,
        CLAUDE_CALLBACK + "\t",
        "https://claude.ai/api/mcp/Auth_callback",
        CLAUDE_CALLBACK + "?x=1",
    ):
        text = await _refused_page(browser, url, attempt)
        assert "not one the application registered" in text
    assert nothing_issued(oauth_clean)


@pytest.mark.parametrize(
    "listed",
    [CLAUDE_CALLBACK + "\n", " " + CLAUDE_CALLBACK, "https://claude.ai/api/mcp/auth\tcallback"],
)
async def test_a_document_listing_a_redirect_uri_with_white_space_is_refused(
    browser: Browser,
    alice_account: int,
    oauth_clean: str,
    document_server: DocumentServer,
    listed: str,
) -> None:
    url = document_server.url("claude.ai", CLAUDE_AI_PATH)
    document = {**claude_ai_document(url), "redirect_uris": [listed]}
    document_server.serve_json(CLAUDE_AI_PATH, document)
    for asked in (listed, CLAUDE_CALLBACK):
        text = await _refused_page(browser, url, asked)
        assert "spaces or control characters" in text
    assert count(oauth_clean, "oauth_clients") == 0
    assert nothing_issued(oauth_clean)


async def test_a_document_gone_bad_stops_the_token_endpoint(
    cimd_http: Any,
    browser: Browser,
    alice_account: int,
    oauth_clean: str,
    document_server: DocumentServer,
) -> None:
    url = document_server.url("claude.ai", CLAUDE_AI_PATH)
    document_server.serve_json(
        CLAUDE_AI_PATH, claude_ai_document(url), {"Cache-Control": "no-store"}
    )
    client = Client({"client_id": url}, CLAUDE_CALLBACK)
    code = await authorize(browser, client)
    document_server.serve_json(CLAUDE_AI_PATH, {**claude_ai_document(url), "client_id": url + "x"})
    result = await token(cimd_http, client.token_form(code))
    assert result.status_code == 401 and result.json["error"] == "invalid_client"
    assert (
        count(oauth_clean, "oauth_grants") == 0 and count(oauth_clean, "oauth_refresh_tokens") == 0
    )


# -- what the person sees ------------------------------------------------------------------------


async def test_a_client_calling_itself_claude_from_another_host_shows_that_host(
    browser: Browser, alice_account: int, document_server: DocumentServer
) -> None:
    url = document_server.url("evil.example", "/claude.json")
    document = {**claude_ai_document(url), "redirect_uris": ["https://evil.example/cb"]}
    document["client_name"] = "Claude <script>alert(1)</script>"
    document_server.serve_json("/claude.json", document)
    consent = await _signed_in(browser, Client({"client_id": url}, "https://evil.example/cb"))
    assert (
        f"identifies itself from <strong>evil.example:{document_server.port}</strong>"
        in consent.text
    )
    assert "<script>" not in consent.text
    assert "Claude &lt;script&gt;alert(1)&lt;/script&gt;" in consent.text
    assert urlsplit("https://evil.example/cb").netloc in consent.text


async def test_a_registered_client_is_shown_as_registered(
    cimd_http: Any, browser: Browser, alice_account: int
) -> None:
    client = await register(cimd_http)
    consent = await _signed_in(browser, client)
    assert "registered client of this server" in consent.text
    assert "identifies itself from" not in consent.text


async def test_a_private_key_jwt_client_revokes_with_an_assertion(
    cimd_http: Any,
    browser: Browser,
    alice_account: int,
    oauth_clean: str,
    document_server: DocumentServer,
) -> None:
    key = ClientKey("ES256")
    url = document_server.url("chatgpt.com", CHATGPT_PATH)
    document_server.serve_json(CHATGPT_PATH, chatgpt_document(url, jwks=key.jwks()))
    client = Client({"client_id": url}, CHATGPT_CALLBACK)
    code = await authorize(browser, client)
    jwt_bearer = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    fields = client.token_form(code) + [
        ("client_assertion_type", jwt_bearer),
        ("client_assertion", key.sign(url, TOKEN_ENDPOINT)),
    ]
    issued = (await token(cimd_http, fields)).json
    revoke_form = [("token", issued["refresh_token"]), ("client_id", url)]

    async def revoke(form: list[tuple[str, str]]) -> Any:
        return await cimd_http.simulate_post(
            "/oauth/revoke",
            body=urlencode(form),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )

    unauthenticated = await revoke(revoke_form)
    assert unauthenticated.status_code == 401
    assert rows(oauth_clean, "SELECT revoked_at IS NULL FROM oauth_grants") == [(True,)]
    signed = key.sign(url, "https://mem.example/oauth/revoke")
    done = await revoke(
        [*revoke_form, ("client_assertion_type", jwt_bearer), ("client_assertion", signed)]
    )
    assert done.status_code == 200, done.text
    assert rows(oauth_clean, "SELECT revoked_at IS NOT NULL FROM oauth_grants") == [(True,)]


async def test_a_registered_loopback_redirect_matches_any_port(
    cimd_http: Any, browser: Browser, alice_account: int
) -> None:
    registered = await register(cimd_http, "http://127.0.0.1/callback")
    client = Client(registered.info, "http://127.0.0.1:49152/callback")
    code = await authorize(browser, client)
    result = await token(cimd_http, client.token_form(code))
    assert result.status_code == 200, result.text


async def test_a_public_document_client_cannot_switch_to_an_assertion(
    cimd_http: Any,
    browser: Browser,
    alice_account: int,
    oauth_clean: str,
    document_server: DocumentServer,
) -> None:
    url = document_server.url("claude.ai", CLAUDE_AI_PATH)
    document_server.serve_json(CLAUDE_AI_PATH, claude_ai_document(url))
    client = Client({"client_id": url}, CLAUDE_CALLBACK)
    code = await authorize(browser, client)
    fields = client.token_form(code) + [
        ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
        ("client_assertion", ClientKey("RS256").sign(url, TOKEN_ENDPOINT)),
    ]
    refused = await token(cimd_http, fields)
    assert (
        refused.status_code == 401 and "does not authenticate with private_key_jwt" in refused.text
    )
    assert count(oauth_clean, "oauth_grants") == 0
    # The code was not spent by the refusal: the client's own request still redeems it.
    assert (await token(cimd_http, client.token_form(code))).status_code == 200
