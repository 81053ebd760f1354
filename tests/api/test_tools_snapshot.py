"""tools/list, byte for byte, against a snapshot.

The registry is many modules (``api/mcp/tool_*.py``); what a client sees must
not move when code moves between them, and every change to what a model reads
is a reviewed diff of the snapshot. To change the listing on purpose, rewrite
the snapshot in the same commit and read its diff:
``python -m tests.api.test_tools_snapshot > tests/api/tools_list.snapshot.json``.
The snapshot was last rewritten for issue 27 (titles, hints; room for MCP Apps).
"""

from __future__ import annotations

import json
from pathlib import Path

from api.mcp.tools import tool_specs
from config.settings import Settings
from tests.api.conftest import PUBLIC_URL, Mcp

SNAPSHOT = Path(__file__).with_name("tools_list.snapshot.json")


def _settings() -> Settings:
    # The api fixtures' settings (tests/api/conftest.py: api_settings).
    return Settings(public_url=PUBLIC_URL, max_body_bytes=4096, max_batch_size=5)


def render(tools: list[dict]) -> str:
    return json.dumps(tools, indent=2, ensure_ascii=False) + "\n"


def current_listing() -> str:
    return render([spec.listing() for spec in tool_specs(_settings()).values()])


def test_registry_listing_matches_the_snapshot() -> None:
    assert current_listing() == SNAPSHOT.read_text(encoding="utf-8")


async def test_live_tools_list_matches_the_snapshot(mcp: Mcp) -> None:
    result = await mcp.request("tools/list")
    assert result.status_code == 200
    assert render(result.json["result"]["tools"]) == SNAPSHOT.read_text(encoding="utf-8")


if __name__ == "__main__":
    print(current_listing(), end="")
