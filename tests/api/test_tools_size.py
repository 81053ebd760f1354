"""tools/list goes into every conversation: at most 16 KB as sent (issue 14).

Measured as the server sends it: the whole JSON-RPC response body, compact
JSON, UTF-8 bytes, output schemas included. Before issue 14 it was 30.8 KB
(no output schemas); what it costs now is printed with ``-s``.
"""

from __future__ import annotations

import json

from api.mcp.tools import tool_specs
from config.settings import Settings
from tests.api.conftest import Mcp, open_session
from tests.api.test_protocol_2026 import modern

LIMIT = 16 * 1024


def registry_bytes(settings: Settings) -> int:
    """The tools/list response for ``settings``, encoded as ``api.mcp.jsonrpc`` encodes replies."""
    tools = [spec.listing() for spec in tool_specs(settings).values()]
    reply = {"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}}
    return len(json.dumps(reply, ensure_ascii=False, separators=(",", ":")).encode())


async def test_the_live_tools_list_is_at_most_16_kb(mcp: Mcp) -> None:
    session = await open_session(mcp)
    for headers in ({}, {"mcp_session_id": session}):
        result = await mcp.request("tools/list", **headers)
        assert result.status_code == 200
        assert len(result.json["result"]["tools"]) == 21
        size = len(result.content)
        print(f"tools/list as sent: {size} bytes ({LIMIT - size} to spare)")
        assert size <= LIMIT


def test_the_listing_at_default_settings_is_at_most_16_kb() -> None:
    # The api fixtures cap batches at 5; the defaults (200) make the limits a digit longer.
    size = registry_bytes(Settings())
    print(f"tools/list at default settings: {size} bytes ({LIMIT - size} to spare)")
    assert size <= LIMIT


async def test_the_tools_list_at_2026_07_28_is_at_most_16_kb(mcp: Mcp) -> None:
    # 2026-07-28 adds resultType, ttlMs, cacheScope and serverInfo to the same listing.
    result = await modern(mcp, "tools/list")
    assert result.status_code == 200
    assert result.json["result"]["resultType"] == "complete"
    size = len(result.content)
    print(f"tools/list at 2026-07-28: {size} bytes ({LIMIT - size} to spare)")
    assert size <= LIMIT
