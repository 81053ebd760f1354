"""tools/list goes into every conversation: a budget per tool (issues 14, 27 and 35).

Measured as the server sends it, at default settings (only the public URL is
set, which no listing shows): the whole JSON-RPC response body, compact JSON,
UTF-8 bytes, output schemas included. Four listings, one test each: the
handshake revisions (2025-x: one listing for all three) and 2026-07-28 (which
adds resultType, ttlMs, cacheScope and serverInfo), each for a client without
MCP Apps and for one offering it (``_meta.ui`` on the tools that have a page).

The budget grows with the tools (docs/adding-a-tool.md, "The listing budget"):

- the listing's bytes divided by its tools (the envelope shared among them) at
  most :data:`AVERAGE_PER_TOOL`;
- each tool's own object (plus the comma between tools) at most :data:`PER_TOOL`.

Before issue 14 the listing was 30.8 KB; issue 35 replaced the fixed 16 KB total
(43 bytes to spare at 21 tools) with this budget. ``pytest -s`` prints each tool's
cost and headroom.
"""

from __future__ import annotations

import json
from typing import Any

import falcon.testing
import pytest

from api.mcp.apps.pages import TOOL_PAGES
from api.mcp.tools import tool_specs
from config.settings import Settings
from tests.api.conftest import PUBLIC_URL, Mcp, open_session
from tests.api.test_mcp_apps import APPS_META, apps_session
from tests.api.test_protocol_2026 import modern

#: The largest listing's bytes per tool, envelope included (21 tools: 778 at issue 35).
AVERAGE_PER_TOOL = 800
#: One tool's bytes in the listing, its comma included: 2 KB (the largest at issue 35:
#: remember, 2,013, whose schema documents every field of a memory; the next, 1,389).
PER_TOOL = 2048


@pytest.fixture
def api_settings() -> Settings:
    # The defaults (MAX_BATCH_SIZE 200, not the api fixtures' 5: the limits the
    # descriptions and schemas state are a digit or two longer).
    return Settings(public_url=PUBLIC_URL)


def tool_cost(tool: dict[str, Any]) -> int:
    """One tool's bytes in a listing as sent: its compact JSON and the comma after it."""
    return len(json.dumps(tool, ensure_ascii=False, separators=(",", ":")).encode()) + 1


def budget_report(label: str, size: int, tools: list[dict[str, Any]]) -> list[str]:
    """What each tool costs and what is left, as ``pytest -s`` prints it."""
    lines = [
        f"tools/list, {label}: {size} bytes for {len(tools)} tools, "
        f"{size / len(tools):.0f} per tool (budget {AVERAGE_PER_TOOL}: "
        f"{AVERAGE_PER_TOOL * len(tools) - size} bytes to spare, room for a tool of up to "
        f"{min(PER_TOOL, AVERAGE_PER_TOOL * (len(tools) + 1) - size)} bytes)"
    ]
    for tool in sorted(tools, key=tool_cost, reverse=True):
        cost = tool_cost(tool)
        lines.append(f"  {tool['name']:<24} {cost:>5} bytes ({PER_TOOL - cost} under {PER_TOOL})")
    return lines


def _measured(reply: falcon.testing.Result, label: str, *, apps: bool) -> None:
    assert reply.status_code == 200, reply.text
    tools = reply.json["result"]["tools"]
    assert [t["name"] for t in tools] == list(tool_specs(Settings(public_url=PUBLIC_URL)))
    # The listing measured is the one this client gets: pages named exactly for MCP Apps.
    pages = {t["name"]: t["_meta"]["ui"]["resourceUri"] for t in tools if "_meta" in t}
    assert pages == (dict(TOOL_PAGES) if apps else {})
    # As sent: the server's own compact encoding (re-encoding it compactly changes nothing).
    compact = json.dumps(reply.json, ensure_ascii=False, separators=(",", ":")).encode()
    assert len(reply.content) == len(compact)
    size = len(reply.content)
    print("\n".join(budget_report(label, size, tools)))
    over = {t["name"]: tool_cost(t) for t in tools if tool_cost(t) > PER_TOOL}
    assert not over, f"over the {PER_TOOL}-byte budget of one tool: {over}"
    assert size <= AVERAGE_PER_TOOL * len(tools), (
        f"{size} bytes for {len(tools)} tools: over {AVERAGE_PER_TOOL} per tool"
    )


async def test_2025_without_the_extension_is_within_budget(mcp: Mcp) -> None:
    session = await open_session(mcp)
    reply = await mcp.request("tools/list", mcp_session_id=session)
    _measured(reply, "2025-11-25 without MCP Apps", apps=False)


async def test_2025_with_the_extension_is_within_budget(mcp: Mcp) -> None:
    session, _ = await apps_session(mcp)
    reply = await mcp.request("tools/list", mcp_session_id=session)
    _measured(reply, "2025-11-25 with MCP Apps", apps=True)


async def test_2026_07_28_without_the_extension_is_within_budget(mcp: Mcp) -> None:
    reply = await modern(mcp, "tools/list")
    assert reply.json["result"]["resultType"] == "complete"
    _measured(reply, "2026-07-28 without MCP Apps", apps=False)


async def test_2026_07_28_with_the_extension_is_within_budget(mcp: Mcp) -> None:
    reply = await modern(mcp, "tools/list", meta=APPS_META)
    assert reply.json["result"]["resultType"] == "complete"
    _measured(reply, "2026-07-28 with MCP Apps", apps=True)


def test_the_budget_refuses_a_tool_over_it() -> None:
    # Not vacuous: a tool one byte over its own budget is reported, and counted so.
    name = {"name": "x"}
    padding = PER_TOOL - tool_cost({**name, "description": ""})
    tool = {**name, "description": "d" * (padding + 1)}
    assert tool_cost(tool) == PER_TOOL + 1
    assert "-1 under" in budget_report("check", PER_TOOL + 1, [tool])[1]
