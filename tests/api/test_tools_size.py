"""tools/list goes into every conversation: at most 16 KB as sent (issues 14 and 27).

Measured as the server sends it, at default settings (only the public URL is
set, which no listing shows): the whole JSON-RPC response body, compact JSON,
UTF-8 bytes, output schemas included. Four listings, one test each: the
handshake revisions (2025-x: one listing for all three) and 2026-07-28 (which
adds resultType, ttlMs, cacheScope and serverInfo), each for a client without
MCP Apps and for one offering it (``_meta.ui`` on the tools that have a page).
Before issue 14 the listing was 30.8 KB; what each costs now is printed with ``-s``.
"""

from __future__ import annotations

import json

import falcon.testing
import pytest

from api.mcp.apps.pages import TOOL_PAGES
from api.mcp.tools import TOOL_ORDER
from config.settings import Settings
from tests.api.conftest import PUBLIC_URL, Mcp, open_session
from tests.api.test_mcp_apps import APPS_META, apps_session
from tests.api.test_protocol_2026 import modern

LIMIT = 16 * 1024


@pytest.fixture
def api_settings() -> Settings:
    # The defaults (MAX_BATCH_SIZE 200, not the api fixtures' 5: the limits the
    # descriptions and schemas state are a digit or two longer).
    return Settings(public_url=PUBLIC_URL)


def _measured(reply: falcon.testing.Result, label: str, *, apps: bool) -> int:
    assert reply.status_code == 200, reply.text
    tools = reply.json["result"]["tools"]
    assert [t["name"] for t in tools] == list(TOOL_ORDER)
    # The listing measured is the one this client gets: pages named exactly for MCP Apps.
    pages = {t["name"]: t["_meta"]["ui"]["resourceUri"] for t in tools if "_meta" in t}
    assert pages == (dict(TOOL_PAGES) if apps else {})
    # As sent: the server's own compact encoding (re-encoding it compactly changes nothing).
    compact = json.dumps(reply.json, ensure_ascii=False, separators=(",", ":")).encode()
    assert len(reply.content) == len(compact)
    size = len(reply.content)
    print(f"tools/list, {label}: {size} bytes ({LIMIT - size} to spare)")
    return size


async def test_2025_without_the_extension_is_at_most_16_kb(mcp: Mcp) -> None:
    session = await open_session(mcp)
    reply = await mcp.request("tools/list", mcp_session_id=session)
    assert _measured(reply, "2025-11-25 without MCP Apps", apps=False) <= LIMIT


async def test_2025_with_the_extension_is_at_most_16_kb(mcp: Mcp) -> None:
    session, _ = await apps_session(mcp)
    reply = await mcp.request("tools/list", mcp_session_id=session)
    assert _measured(reply, "2025-11-25 with MCP Apps", apps=True) <= LIMIT


async def test_2026_07_28_without_the_extension_is_at_most_16_kb(mcp: Mcp) -> None:
    reply = await modern(mcp, "tools/list")
    assert reply.json["result"]["resultType"] == "complete"
    assert _measured(reply, "2026-07-28 without MCP Apps", apps=False) <= LIMIT


async def test_2026_07_28_with_the_extension_is_at_most_16_kb(mcp: Mcp) -> None:
    reply = await modern(mcp, "tools/list", meta=APPS_META)
    assert reply.json["result"]["resultType"] == "complete"
    assert _measured(reply, "2026-07-28 with MCP Apps", apps=True) <= LIMIT
