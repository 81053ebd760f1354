"""Exact redirect URIs over HTTP (issue 27 item 4; RFC 8252 §7.3).

A ``redirect_uri`` must be a registered one character for character; only a
loopback URI's port may differ. White space and control characters are never
normalised away: such a request gets the authorization server's error page
(no redirect, no code), a token request carrying one is refused, and
registration refuses such a URI.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

import pytest

from tests.auth.oauth_flow import (
    Browser,
    Client,
    alice_account,
    authorize,
    browser,
    count,
    oauth_clean,
    oauth_http,
    oauth_options,
    register,
    token,
)

__all__ = ["alice_account", "browser", "oauth_clean", "oauth_http", "oauth_options"]

V4 = "http://127.0.0.1/callback"
V6 = "http://[::1]/callback"
NAMED = "http://localhost/callback"
WEB = "https://app.example/oauth/callback"
ISSUED = ("oauth_codes", "oauth_grants", "oauth_refresh_tokens")


def _nothing_issued(dsn: str) -> bool:
    return all(count(dsn, table) == 0 for table in ISSUED)


async def _client(conductor: Any, redirect_uri: str) -> Client:
    """A client registered with every URI above, asking for ``redirect_uri``."""
    registered = await register(conductor, WEB, redirect_uris=[WEB, V4, V6, NAMED])
    return Client(registered.info, redirect_uri)


async def _error_page(browser: Browser, query_string: str) -> str:
    """The answer to an authorization request that must not be redirected anywhere."""
    result = await browser.conductor.simulate_get(
        "/oauth/authorize", query_string=query_string, remote_addr=browser.remote_addr
    )
    assert result.status_code == 400, result.text[:1500]
    assert "location" not in result.headers
    assert result.headers["content-type"].startswith("text/html")
    assert "cannot continue" in result.text
    return result.text


@pytest.mark.parametrize(
    "redirect_uri",
    [
        WEB + "\n",  # sent as %0A
        WEB + "\r\n",
        " " + WEB,
        WEB + " ",
        "\t" + WEB,
        "https://app.example/oauth/call\tback",
        WEB + "\x00",
        "https://app.example/OAuth/callback",  # path case
        "https://APP.example/oauth/callback",  # host case
        WEB + "?x=1",  # an extra query
        WEB + "/",
        "https://app.example:443/oauth/callback",  # another spelling of the same port
        V4 + "\n",
        "http://127.0.0.1:49152/callback\n",
        "http://127.0.0.1:49\t152/callback",  # Python's URL parser would drop the tab
        "http://127.0.0.1:49152/call\nback",
        " http://127.0.0.1:49152/callback",
        "http://[::1]:49152/callback%0A",  # sent as %250A: a literal "%0A" in the path
        "http://[::1]:49152/callback\n",
        "http://[::1]:49152/Callback",
        "http://[::1]:49152/callback?x=1",
        "http://127.0.0.1:49152/callback/",
        "http://localhost:49152/callback\n",
        "http://127.0.0.2:49152/callback",  # another loopback address than registered
        "http://[::1]:49152/callback#x",
    ],
)
async def test_a_redirect_uri_not_exactly_registered_gets_the_error_page(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str, redirect_uri: str
) -> None:
    client = await _client(oauth_http, redirect_uri)
    text = await _error_page(browser, urlencode(client.authorization_params()))
    assert "not one the application registered" in text
    assert _nothing_issued(oauth_clean)


async def test_a_raw_newline_and_an_encoded_one_are_refused_alike(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    client = await _client(oauth_http, V4)
    params = client.authorization_params()
    rest = urlencode({k: v for k, v in params.items() if k != "redirect_uri"})
    for written in (quote(V4, safe="") + "%0A", quote(V4, safe="") + "%0a", V4 + "%0D%0A"):
        await _error_page(browser, f"{rest}&redirect_uri={written}")
    await _error_page(browser, f"{rest}&redirect_uri=+{quote(V4, safe='')}")  # a leading space
    assert _nothing_issued(oauth_clean)


@pytest.mark.parametrize(
    ("registered", "requested"),
    [
        (V4, "http://127.0.0.1:49152/callback"),
        (V4, "http://127.0.0.1/callback"),
        (V6, "http://[::1]:60001/callback"),
        # localhost by name: matched like the IP literals (RFC 8252 §8.3 only advises
        # against it; the MCP Inspector and the SDK examples register it).
        (NAMED, "http://localhost:33418/callback"),
    ],
)
async def test_a_loopback_redirect_may_use_any_port_and_the_token_request_repeats_it(
    oauth_http: Any,
    browser: Browser,
    alice_account: int,
    oauth_clean: str,
    registered: str,
    requested: str,
) -> None:
    client = await _client(oauth_http, requested)
    # A code is spent by its first redemption attempt, so each attempt gets its own.
    for altered in (requested + "\n", " " + requested, requested + "/", requested + "?x=1"):
        code = await authorize(browser, client)
        refused = await token(oauth_http, client.token_form(code, redirect_uri=altered))
        assert refused.status_code == 400 and refused.json["error"] == "invalid_grant"
    assert count(oauth_clean, "oauth_grants") == 0
    code = await authorize(browser, client)
    result = await token(oauth_http, client.token_form(code))
    assert result.status_code == 200, result.text


async def test_the_token_request_with_another_loopback_port_is_refused(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    client = await _client(oauth_http, "http://[::1]:5000/callback")
    code = await authorize(browser, client)
    other = await token(
        oauth_http, client.token_form(code, redirect_uri="http://[::1]:5001/callback")
    )
    assert other.status_code == 400 and other.json["error"] == "invalid_grant"
    assert count(oauth_clean, "oauth_grants") == 0


async def test_a_token_request_with_a_raw_trailing_newline_is_refused(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str
) -> None:
    client = await _client(oauth_http, WEB)
    code = await authorize(browser, client)
    form = client.token_form(code, redirect_uri=None)
    # Written by hand: the newline goes unencoded, as a careless client would send it.
    body = urlencode(form) + "&redirect_uri=" + quote(WEB, safe="") + "\n"
    result = await oauth_http.simulate_post(
        "/oauth/token",
        body=body,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert result.status_code == 400 and result.json["error"] == "invalid_grant"
    assert count(oauth_clean, "oauth_grants") == 0
    code = await authorize(browser, client)
    good = await token(oauth_http, client.token_form(code))
    assert good.status_code == 200, good.text


@pytest.mark.parametrize(
    "uri",
    [
        WEB + "\n",
        " " + WEB,
        WEB + "\t",
        "https://app.example/oauth/ca llback",
        "http://127.0.0.1/callback\r",
        "http://[::1]:5000/callback\x0b",
        WEB + "\u2028",
    ],
)
async def test_registration_refuses_a_redirect_uri_with_white_space_or_a_control_character(
    oauth_http: Any, oauth_clean: str, uri: str
) -> None:
    result = await oauth_http.simulate_post(
        "/oauth/register", json={"redirect_uris": [WEB, uri], "client_name": "App"}
    )
    assert result.status_code == 400
    assert result.json["error"] == "invalid_redirect_uri"
    assert count(oauth_clean, "oauth_clients") == 0
