"""``http://localhost:PORT/mcp`` just works in the embedded default, which serves 127.0.0.1.

The official SDK's OAuth client compares the protected resource with the URL
it was given; the metadata names the loopback host the client used, while
the issuer and the tokens' audience stay the configured 127.0.0.1 form, so a
token minted by ``ownsona token`` works on either name.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from auth.loopback import resource_for_host, same_resource
from tests.ops.lifecycle_helpers import call_tool

from .server import run_processes


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
        ("http://127.0.0.1:8000/mcp", "https://memory.example.com/mcp", False),  # a public URL: exact
        ("https://memory.example.com/mcp/", "https://memory.example.com/mcp", True),
    ],
)
def test_only_the_loopback_names_of_one_port_are_one_resource(requested: str, resource: str, same: bool) -> None:
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


async def test_the_metadata_names_the_loopback_host_the_client_used(tmp_path: Any, dsn: str) -> None:
    with run_processes(tmp_path, {"DATABASE_URL": dsn}) as server:
        port = server.url.rsplit(":", 1)[1]
        localhost = f"http://localhost:{port}"
        async with httpx.AsyncClient(timeout=30) as http:
            for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
                seen = (await http.get(f"{localhost}{path}")).json()
                assert seen["resource"] == f"{localhost}/mcp"
                assert seen["authorization_servers"] == [server.url]  # one issuer for both names
                canonical = (await http.get(f"{server.url}{path}")).json()
                assert canonical["resource"] == f"{server.url}/mcp"
                other = (await http.get(f"{server.url}{path}", headers={"Host": f"evil.example:{port}"})).json()
                assert other["resource"] == f"{server.url}/mcp"
        # A token minted for 127.0.0.1 (`ownsona token`) works on localhost.
        stored = call_tool(localhost, server.token(), "remember", {"text": "The spare key is under the blue pot."})
        found = call_tool(server.url, server.token(), "recall", {"query": "spare key"})
        assert found["matches"][0]["id"] == stored["memory_id"]
