"""The host side of the MCP Apps browser test: a backend holding one MCP session, and a
page (``apps_host.html``) that renders our ``ui://`` pages as a host does, with the
official SDK's ``AppBridge`` (``vendor/ext-apps``, served at ``/ext-apps-host.min.js``).

``HostBackend`` is what a chat client's server does: it connects to /mcp with the
user's token, offering the ``io.modelcontextprotocol/ui`` extension, calls tools,
reads each tool's page with ``resources/read``, and, over a small local HTTP
server, gives the host page its ``/mcp``: every ``tools/call`` and
``resources/read`` a page sends goes to OwnSona in that same session, under the
same token. Nothing is faked on the OwnSona side.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx

from tests.providers.local_http import serve_local

HOST_PAGE = Path(__file__).with_name("apps_host.html")
EXT_APPS = Path(__file__).parent / "vendor" / "ext-apps"
#: The official host bridge, bundled for the browser (vendor/ext-apps/README.md).
BRIDGE_BUNDLE = EXT_APPS / "ext-apps-host.min.js"
UI_EXTENSION = "io.modelcontextprotocol/ui"
APP_MIME_TYPE = "text/html;profile=mcp-app"
VERSION = "2025-11-25"


class HostBackend:
    """One MCP session of a host that renders MCP Apps."""

    def __init__(self, url: str, token: str) -> None:
        self._lock = threading.Lock()
        self._pages: dict[str, str] = {}
        self._id = 0
        self.http = httpx.Client(
            base_url=url,
            timeout=120,
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
            },
        )
        reply = self.http.post(
            "/mcp",
            json={
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": VERSION,
                    "capabilities": {"extensions": {UI_EXTENSION: {"mimeTypes": [APP_MIME_TYPE]}}},
                    "clientInfo": {"name": "test-host", "version": "1"},
                },
            },
        )
        reply.raise_for_status()
        self.capabilities: dict[str, Any] = reply.json()["result"]["capabilities"]
        self.session = reply.headers["mcp-session-id"]
        self.tools = {t["name"]: t for t in self.rpc("tools/list", {})["result"]["tools"]}

    def rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One JSON-RPC request in the session; the whole response body."""
        with self._lock:
            self._id += 1
            rid = self._id
        reply = self.http.post(
            "/mcp",
            content=json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}),
            headers={"MCP-Protocol-Version": VERSION, "Mcp-Session-Id": self.session},
        )
        assert reply.status_code == 200, reply.text
        return reply.json()  # type: ignore[no-any-return]

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A ``CallToolResult`` (the model's own call that the host then renders)."""
        return self.rpc("tools/call", {"name": name, "arguments": arguments})["result"]  # type: ignore[no-any-return]

    def page_of(self, tool: str) -> str:
        """The HTML of the page a tool names in ``_meta.ui.resourceUri`` (read once per
        page, as a host caches a UI resource)."""
        uri = self.tools[tool]["_meta"]["ui"]["resourceUri"]
        if uri not in self._pages:
            (content,) = self.rpc("resources/read", {"uri": uri})["result"]["contents"]
            assert content["mimeType"] == APP_MIME_TYPE
            self._pages[uri] = content["text"]
        return self._pages[uri]

    @contextmanager
    def serve(self) -> Iterator[str]:
        """The host page and its /mcp on a local port; yields the page's URL."""
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                if self.path == "/" + BRIDGE_BUNDLE.name:
                    self._send(200, "text/javascript", BRIDGE_BUNDLE.read_bytes())
                else:
                    self._send(200, "text/html; charset=utf-8", HOST_PAGE.read_bytes())

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", "0"))
                message = json.loads(self.rfile.read(length))
                # A fresh id in the session for every forwarded call, as a host's client does.
                answer = backend.rpc(message["method"], message.get("params") or {})
                self._send(200, "application/json", json.dumps(answer).encode())

            def _send(self, status: int, content_type: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        with serve_local(Handler, "/") as url:
            yield url

    def close(self) -> None:
        self.http.close()
