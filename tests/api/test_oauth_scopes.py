"""Scopes at /mcp: read-only tools need memory:read, the others memory:write (403 otherwise)."""

from __future__ import annotations

from typing import Any

import pytest

from auth.tokens import issue_access_token
from tests.api.conftest import Mcp
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
    token,
)

__all__ = ["alice_account", "bob_account", "browser", "oauth_clean", "oauth_http", "oauth_options"]


def _mcp(conductor: Any, keystore: Any, settings: Any, user_id: int, scope: str) -> Mcp:
    value = issue_access_token(keystore, settings, user_id=user_id, client_id="c", scope=scope)
    return Mcp(conductor, value)


@pytest.mark.parametrize(
    ("scope", "tool", "arguments", "missing"),
    [
        ("memory:read", "remember", {"text": "I like tea."}, "memory:write"),
        ("memory:read", "forget", {"id": 1}, "memory:write"),
        ("memory:write", "recall", {"query": "tea"}, "memory:read"),
        ("memory:write", "list_memories", {}, "memory:read"),
        ("", "recall", {"query": "tea"}, "memory:read"),
    ],
)
async def test_missing_scope_is_403_insufficient_scope(
    oauth_http: Any,
    keystore: Any,
    api_settings: Any,
    alice_account: int,
    use_cases: Any,
    write_queue: Any,
    scope: str,
    tool: str,
    arguments: dict[str, Any],
    missing: str,
) -> None:
    mcp = _mcp(oauth_http, keystore, api_settings, alice_account, scope)
    result = await mcp.request("tools/call", {"name": tool, "arguments": arguments})
    assert result.status_code == 403
    challenge = result.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge
    assert f'scope="{missing}"' in challenge
    assert (
        'resource_metadata="https://mem.example/.well-known/oauth-protected-resource"' in challenge
    )
    assert result.json["error"] == "insufficient_scope"
    assert use_cases.calls == [] and write_queue.calls == []


@pytest.mark.parametrize(
    ("scope", "tool", "arguments"),
    [
        ("memory:read", "recall", {"query": "tea"}),
        ("memory:write", "remember", {"text": "I like tea."}),
        ("memory:read memory:write", "forget", {"id": 1}),
    ],
)
async def test_matching_scope_is_served(
    oauth_http: Any,
    keystore: Any,
    api_settings: Any,
    alice_account: int,
    scope: str,
    tool: str,
    arguments: dict[str, Any],
) -> None:
    mcp = _mcp(oauth_http, keystore, api_settings, alice_account, scope)
    result = await mcp.request("tools/call", {"name": tool, "arguments": arguments})
    assert result.status_code == 200, result.text


async def test_any_valid_token_may_initialize_and_list(
    oauth_http: Any, keystore: Any, api_settings: Any, alice_account: int
) -> None:
    mcp = _mcp(oauth_http, keystore, api_settings, alice_account, "")
    assert (await mcp.request("tools/list")).status_code == 200
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    assert (await mcp.request("initialize", init)).status_code == 200


async def test_a_batch_with_one_unauthorised_call_is_refused_whole(
    oauth_http: Any, keystore: Any, api_settings: Any, alice_account: int, use_cases: Any
) -> None:
    mcp = _mcp(oauth_http, keystore, api_settings, alice_account, "memory:read")
    batch = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "recall", "arguments": {"query": "x"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "remember", "arguments": {"text": "x y z"}},
        },
    ]
    result = await mcp.post(batch)
    assert result.status_code == 403 and use_cases.calls == []


async def test_read_only_client_gets_a_read_only_token(
    oauth_http: Any, browser: Browser, alice_account: int
) -> None:
    client = await register(oauth_http)
    code = await authorize(browser, client, scope="memory:read")
    body = (await token(oauth_http, client.token_form(code))).json
    assert body["scope"] == "memory:read"
    mcp = Mcp(oauth_http, body["access_token"])
    assert (
        await mcp.request("tools/call", {"name": "recall", "arguments": {"query": "x"}})
    ).status_code == 200
    refused = await mcp.request("tools/call", {"name": "remember", "arguments": {"text": "x y"}})
    assert refused.status_code == 403
