"""The official MCP SDK client connects to a running ``ownsona serve`` through OAuth.

No token at the start: the client gets a 401, discovers the protected
resource and the authorization server, registers, authorizes (this test
plays the user's browser: it submits the sign-in and consent forms over
HTTP), exchanges the code, calls tools, and refreshes once the access
token expires (``ACCESS_TOKEN_TTL=10`` here).
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urljoin

import httpx
import httpx2
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from tests.auth.oauth_flow import oauth_clean, parse_form, query_of

from .server import run_processes

__all__ = ["oauth_clean"]

#: Claude Code's shape of redirect URI; nothing listens there: the test reads the Location.
REDIRECT_URI = "http://localhost:33418/callback"
USERNAME, PASSWORD = "e2e", "correct horse battery"
ACCESS_TTL_S = 10


class MemoryTokenStorage:
    """The SDK's TokenStorage protocol, remembering every token set it is given."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None
        self.history: list[OAuthToken] = []

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.history.append(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class FormFillingBrowser:
    """Plays the user: opens the authorization URL, signs in, allows, keeps the redirect."""

    def __init__(self) -> None:
        self.location: str | None = None
        self.pages: list[str] = []

    async def open(self, url: str) -> None:
        async with httpx.AsyncClient(follow_redirects=False, timeout=30) as browser:
            page = await browser.get(url)
            while page.status_code == 200:
                self.pages.append(page.text)
                form = parse_form(page.text)
                fields = dict(form["fields"])
                if "password" in fields:
                    fields.update(username=USERNAME, password=PASSWORD)
                else:
                    fields["decision"] = "allow"
                page = await browser.post(urljoin(url, form["action"]), data=fields)
            assert page.status_code in (302, 303), page.text
            self.location = page.headers["location"]

    async def callback(self) -> AuthorizationCodeResult:
        assert self.location is not None and self.location.startswith(REDIRECT_URI)
        query = query_of(self.location)
        return AuthorizationCodeResult(
            code=query["code"], state=query.get("state"), iss=query.get("iss")
        )


async def _scenario(url: str) -> None:
    storage = MemoryTokenStorage()
    browser = FormFillingBrowser()
    provider = OAuthClientProvider(
        server_url=f"{url}/mcp",
        client_metadata=OAuthClientMetadata(
            client_name="ownsona e2e",
            redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage=storage,
        redirect_handler=browser.open,
        callback_handler=browser.callback,
    )
    http = httpx2.AsyncClient(auth=provider, timeout=60)
    async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
        assert client.server_info is not None and client.server_info.name == "ownsona"
        # Discovery, registration and authorization happened on the way in.
        assert storage.client_info is not None and storage.client_info.client_secret is None
        assert len(storage.history) == 1
        first = storage.history[0]
        assert first.refresh_token and first.expires_in == ACCESS_TTL_S
        assert first.scope == "memory:read memory:write"
        assert any("Sign in" in p for p in browser.pages)
        assert any("Allow ownsona e2e" in p for p in browser.pages)

        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"remember", "recall"} <= tools
        stored = await client.call_tool("remember", {"text": "My sister Dana lives in Lisbon."})
        assert stored.is_error is False, stored.structured_content
        memory_id = stored.structured_content["memory_id"]  # type: ignore[index]

        # Let the access token expire: the client refreshes on expires_in, by itself.
        await asyncio.sleep(ACCESS_TTL_S + 1)
        found = await client.call_tool("recall", {"query": "where does my sister live"})
        assert found.is_error is False
        assert found.structured_content["matches"][0]["id"] == memory_id  # type: ignore[index]
        assert len(storage.history) == 2, "the client should have refreshed exactly once"
        second = storage.history[1]
        assert second.refresh_token and second.refresh_token != first.refresh_token
        assert second.access_token != first.access_token


async def test_sdk_client_connects_through_oauth(tmp_path: Any, dsn: str, oauth_clean: str) -> None:
    env = {"DATABASE_URL": dsn, "ACCESS_TOKEN_TTL": str(ACCESS_TTL_S)}
    with run_processes(tmp_path, env) as server:
        # Without a token the server asks for one and says where to learn how.
        async with httpx.AsyncClient(timeout=30) as http:
            bare = await http.post(
                f"{server.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}
            )
        assert bare.status_code == 401
        assert "resource_metadata=" in bare.headers["www-authenticate"]
        await _scenario(server.url)
        log = server.log()
    assert "registered OAuth client" in log
    assert PASSWORD not in log
