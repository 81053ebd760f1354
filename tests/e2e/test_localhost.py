"""``http://localhost:PORT/mcp`` just works in the embedded default, which serves 127.0.0.1.

The official SDK's OAuth client compares the protected resource with the URL
it was given; the metadata names the loopback host the client used, while
the issuer and the tokens' audience stay the configured 127.0.0.1 form, so a
token minted by ``ownsona token`` works on either name.
"""

from __future__ import annotations

from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata

from auth.loopback import resource_for_host, same_resource
from tests.auth.oauth_flow import oauth_clean
from tests.ops.lifecycle_helpers import call_tool

from .server import run_processes
from .test_oauth_sdk import REDIRECT_URI, FormFillingBrowser, MemoryTokenStorage

__all__ = ["oauth_clean"]


@pytest.mark.parametrize(
    ("requested", "resource", "same"),
    [
        ("http://localhost:8000/mcp", "http://127.0.0.1:8000/mcp", True),
        ("http://127.0.0.1:8000/mcp/", "http://localhost:8000/mcp", True),
        ("http://LOCALHOST:8000/mcp", "http://127.0.0.1:8000/mcp", True),
        ("http://localhost:8001/mcp", "http://127.0.0.1:8000/mcp", False),  # another port
        ("https://localhost:8000/mcp", "http://127.0.0.1:8000/mcp", False),  # another scheme
        ("http://localhost/mcp", "http://127.0.0.1/mcp", False),  # no explicit port: left as it is
        ("http://localhost:8000/other", "http://127.0.0.1:8000/mcp", False),
        ("http://memory.example.com/mcp", "https://memory.example.com/mcp", False),
        (
            "http://127.0.0.1:8000/mcp",
            "https://memory.example.com/mcp",
            False,
        ),  # a public URL: exact
        ("https://memory.example.com/mcp/", "https://memory.example.com/mcp", True),
    ],
)
def test_only_the_loopback_names_of_one_port_are_one_resource(
    requested: str, resource: str, same: bool
) -> None:
    assert same_resource(requested, resource) is same


def test_the_resource_follows_a_loopback_host_only() -> None:
    local = "http://127.0.0.1:8000/mcp"
    assert resource_for_host(local, "localhost:8000") == "http://localhost:8000/mcp"
    assert resource_for_host(local, "127.0.0.1:8000") == local
    assert resource_for_host(local, "evil.example:8000") == local
    assert resource_for_host(local, "localhost:9000") == local
    assert resource_for_host(local, None) == local
    public = "https://memory.example.com/mcp"
    assert resource_for_host(public, "localhost:8000") == public


async def test_the_sdk_client_connects_to_localhost_and_tokens_work_on_both_names(
    tmp_path: Any, dsn: str, oauth_clean: str
) -> None:
    with run_processes(tmp_path, {"DATABASE_URL": dsn}) as server:
        port = server.url.rsplit(":", 1)[1]
        localhost = f"http://localhost:{port}"
        async with httpx.AsyncClient(timeout=30) as http:
            bare = await http.post(
                f"{localhost}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}
            )
            assert bare.status_code == 401
            assert (
                f'resource_metadata="{localhost}/.well-known/' in bare.headers["www-authenticate"]
            )
            for path in (
                "/.well-known/oauth-protected-resource",
                "/.well-known/oauth-protected-resource/mcp",
            ):
                seen = (await http.get(f"{localhost}{path}")).json()
                assert seen["resource"] == f"{localhost}/mcp"
                assert seen["authorization_servers"] == [server.url]  # one issuer for both names
                canonical = (await http.get(f"{server.url}{path}")).json()
                assert canonical["resource"] == f"{server.url}/mcp"
                other = (
                    await http.get(f"{server.url}{path}", headers={"Host": f"evil.example:{port}"})
                ).json()
                assert (
                    other["resource"] == f"{server.url}/mcp"
                )  # only loopback names follow the Host

        storage = MemoryTokenStorage()
        browser = FormFillingBrowser()
        provider = OAuthClientProvider(
            server_url=f"{localhost}/mcp",
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
        http2 = httpx2.AsyncClient(auth=provider, timeout=60)
        async with (
            http2,
            Client(streamable_http_client(f"{localhost}/mcp", http_client=http2)) as client,
        ):
            stored = await client.call_tool(
                "remember", {"text": "The spare key is under the blue pot."}
            )
            assert stored.is_error is False, stored.structured_content
        assert storage.tokens is not None
        # The client's token (got through localhost) on 127.0.0.1, and a CLI token on localhost.
        found = call_tool(server.url, storage.tokens.access_token, "recall", {"query": "spare key"})
        assert found["matches"][0]["id"] == stored.structured_content["memory_id"]  # type: ignore[index]
        found = call_tool(localhost, server.token(), "recall", {"query": "spare key"})
        assert found["matches"], found
