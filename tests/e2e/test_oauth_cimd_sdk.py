"""The official MCP SDK client connects through OAuth with a Client ID Metadata Document.

``OAuthClientProvider(client_metadata_url=...)``: the server advertises
``client_id_metadata_document_supported``, so the SDK registers nothing and
uses the URL as its client_id. The running server fetches the document from
a local HTTPS server whose certificate comes from a test CA, trusted through
``SSL_CERT_FILE``; ``CIMD_ALLOW_LOOPBACK=true`` lets it reach 127.0.0.1. The
document has Claude Code's shape (loopback redirect URIs without a port); the
SDK redirects to an ephemeral port. This test plays the user's browser.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata

from tests.auth.cimd_server import (
    CLAUDE_CODE_PATH,
    DocumentServer,
    ca_file,
    claude_code_document,
    document_server,
    test_ca,
)
from tests.auth.oauth_flow import oauth_clean

from .server import run_processes
from .test_oauth_sdk import PASSWORD, REDIRECT_URI, FormFillingBrowser, MemoryTokenStorage

__all__ = ["ca_file", "document_server", "oauth_clean", "test_ca"]


async def _scenario(url: str, document_url: str) -> FormFillingBrowser:
    storage = MemoryTokenStorage()
    browser = FormFillingBrowser()
    provider = OAuthClientProvider(
        server_url=f"{url}/mcp",
        client_metadata=OAuthClientMetadata(
            client_name="Claude Code",
            redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage=storage,
        redirect_handler=browser.open,
        callback_handler=browser.callback,
        client_metadata_url=document_url,
    )
    http = httpx2.AsyncClient(auth=provider, timeout=60)
    async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
        assert client.server_info is not None and client.server_info.name == "ownsona"
        # No registration: the document's URL is the client_id.
        assert storage.client_info is not None
        assert storage.client_info.client_id == document_url
        assert storage.client_info.client_secret is None
        assert len(storage.history) == 1 and storage.history[0].refresh_token

        stored = await client.call_tool("remember", {"text": "My sister Dana lives in Lisbon."})
        assert stored.is_error is False, stored.structured_content
        found = await client.call_tool("recall", {"query": "where does my sister live"})
        assert found.is_error is False
        assert (
            found.structured_content["matches"][0]["id"] == stored.structured_content["memory_id"]
        )  # type: ignore[index]
    return browser


async def test_sdk_client_connects_with_a_client_id_metadata_document(
    tmp_path: Any, dsn: str, oauth_clean: str, ca_file: Path, document_server: DocumentServer
) -> None:
    document_url = document_server.url("127.0.0.1", CLAUDE_CODE_PATH)
    document_server.serve_json(CLAUDE_CODE_PATH, claude_code_document(document_url))
    env = {"DATABASE_URL": dsn, "SSL_CERT_FILE": str(ca_file), "CIMD_ALLOW_LOOPBACK": "true"}
    with run_processes(tmp_path, env) as server:
        async with httpx.AsyncClient(timeout=30) as http:
            metadata = (
                await http.get(f"{server.url}/.well-known/oauth-authorization-server")
            ).json()
        assert metadata["client_id_metadata_document_supported"] is True
        assert "none" in metadata["token_endpoint_auth_methods_supported"]
        browser = await _scenario(server.url, document_url)
        log = server.log()
    # The sign-in and consent pages named the document's client and where it comes from.
    assert any("Sign in to connect Claude Code" in p for p in browser.pages)
    consent = next(p for p in browser.pages if "Allow Claude Code" in p)
    assert f"<strong>127.0.0.1:{document_server.port}</strong>" in consent
    assert document_server.hits[CLAUDE_CODE_PATH] >= 1
    assert "registered OAuth client" not in log
    assert PASSWORD not in log
