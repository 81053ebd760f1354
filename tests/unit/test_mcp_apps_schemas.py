"""Every message the MCP Apps pages send and accept, against the SDK's own schemas.

The pages speak to a host only through ``bridge.js``. Here it runs in Node
(``apps_bridge_harness.mjs``: a window's postMessage and nothing else) through one
conversation that holds every message kind of MCP Apps a page meets: the handshake,
tool input (partial and whole), the result, a cancellation, a context change, the
host's requests (``ping``, teardown, and ``tools/list`` / ``tools/call``, which pages
without tools refuse), and the page's own ``tools/call``, answered and timed out. Each
message both ways is checked against ``@modelcontextprotocol/ext-apps``'s generated
schema.json and the MCP core schemas (``tests/e2e/apps_schemas.py``); the browser test
checks the real pages' conversations with the official ``AppBridge`` the same way.
Skipped without ``node`` (Debian's ``nodejs``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.apps_schemas import METHODS, problems, versions

BRIDGE = Path(__file__).parents[2] / "api" / "mcp" / "apps" / "pages" / "bridge.js"
HARNESS = Path(__file__).with_name("apps_bridge_harness.mjs")
NODE = shutil.which("node")
TIMEOUT_MS = 30000  # bridge.js's TOOL_CALL_TIMEOUT_MS

TOOL = {
    "name": "recall",
    "inputSchema": {"type": "object"},
    "_meta": {"ui": {"resourceUri": "ui://ownsona/cards"}},
}
PAYLOAD = {"ok": True, "matches": [{"id": 1, "text": "My sister Ana lives in Porto.", "tags": []}]}
TOOL_RESULT = {
    "content": [{"type": "text", "text": json.dumps(PAYLOAD)}],
    "structuredContent": PAYLOAD,
}
INITIALIZE = {
    "protocolVersion": "2026-01-26",
    "hostInfo": {"name": "host", "version": "1"},
    "hostCapabilities": {"serverTools": {}, "logging": {}},
    "hostContext": {
        "theme": "dark",
        "styles": {
            "variables": {"--font-sans": "HostSans, sans-serif", "--color-text-primary": "#fff"},
            "css": {"fonts": '@font-face { font-family: "HostSans"; src: local("DejaVu Sans"); }'},
        },
        "displayMode": "inline",
        "availableDisplayModes": ["inline"],
        "containerDimensions": {"maxHeight": 500, "width": 400},
        "locale": "en-GB",
        "timeZone": "UTC",
        "platform": "web",
        "toolInfo": {"id": 1, "tool": TOOL},
    },
}
ARGUMENTS = {"query": "where does my sister live"}
HOST = [
    {"method": "ui/notifications/tool-input-partial", "params": {"arguments": {"query": "where"}}},
    {"method": "ui/notifications/tool-input", "params": {"arguments": ARGUMENTS}},
    {"method": "ui/notifications/tool-cancelled", "params": {"reason": "user action"}},
    {"method": "ui/notifications/tool-result", "params": TOOL_RESULT},
    {"method": "ui/notifications/host-context-changed", "params": {"theme": "light"}},
    {"id": "ping-1", "method": "ping"},
    {"id": 7, "method": "ui/resource-teardown", "params": {}},
    {"id": 8, "method": "tools/list", "params": {}},
    {"id": 9, "method": "tools/call", "params": {"name": "recall", "arguments": ARGUMENTS}},
]


def _play() -> dict[str, Any]:
    if NODE is None:
        pytest.skip("needs node (Debian's nodejs)")
    story = {
        "bridge": str(BRIDGE),
        "initialize": INITIALIZE,
        "host": [{"jsonrpc": "2.0", **m} for m in HOST],
        "toolResult": TOOL_RESULT,
    }
    run = subprocess.run(
        [NODE, str(HARNESS)], input=json.dumps(story), capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)  # type: ignore[no-any-return]


def test_every_message_of_a_page_conforms_to_the_ext_apps_schemas() -> None:
    assert versions()["@modelcontextprotocol/ext-apps"] == "2.0.4"
    played = _play()
    conversation = [(sender, message) for sender, message in played["conversation"]]
    assert problems(conversation) == []
    # Every kind of message was there to be checked, both ways.
    methods = {m.get("method") for _, m in conversation}
    assert set(METHODS) <= methods, set(METHODS) - methods
    sent = {m.get("method") for sender, m in conversation if sender == "app"}
    assert {"ui/initialize", "tools/call", "notifications/cancelled"} <= sent
    # The host's requests: ping and teardown served, tools/* refused (no tools declared).
    answers = {m["id"]: m for sender, m in conversation if sender == "app" and "method" not in m}
    assert answers["ping-1"]["result"] == {} and answers[7]["result"] == {}
    assert answers[8]["error"]["code"] == answers[9]["error"]["code"] == -32601
    # The page heard the input and the result; the cancellation came after the input and
    # before the result, so the page was told.
    assert played["received"] == [
        "ui/notifications/tool-input-partial",
        "ui/notifications/tool-input",
        "ui/notifications/tool-cancelled",
        "ui/notifications/tool-result",
    ]
    # The unanswered tools/call ended at the stated timeout, cancelled with the SDK's own
    # notification (checked above), as a failure the page shows.
    assert played["timeouts"] == [TIMEOUT_MS]
    assert played["timedOut"]["error"]["code"] == "TIMEOUT"
