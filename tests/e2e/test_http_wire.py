"""What a real HTTP server hands the app, byte for byte, that the in-process tests cannot show.

``falcon.testing`` trims header values itself; uvicorn's parser leaves trailing
whitespace in place. So these requests go over a raw socket to ``ownsona serve``.
"""

from __future__ import annotations

import json
import socket
from typing import Any

from tests.e2e.server import run_processes

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _raw_post(port: int, token: str, body: dict[str, Any], headers: dict[str, str]) -> bytes:
    payload = json.dumps(body).encode()
    lines = [
        "POST /mcp HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        f"Authorization: Bearer {token}",
        "Content-Type: application/json",
        f"Content-Length: {len(payload)}",
        "Connection: close",
        *(f"{k}:{v}" for k, v in headers.items()),
    ]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(request)
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    return reply


def test_whitespace_around_mcp_header_values_is_not_part_of_them(
    tmp_path: Any, dsn: str, clean_db: str
) -> None:
    # RFC 9110 §5.5: a field value excludes the whitespace around it. The conformance
    # suite's http-header-validation sends "Mcp-Name:   remember  " (it got a 400 before).
    with run_processes(tmp_path, {"DATABASE_URL": dsn}) as server:
        port = int(server.url.rsplit(":", 1)[1])
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "count_memories", "arguments": {}, "_meta": MODERN_META},
        }
        headers = {
            "MCP-Protocol-Version": " 2026-07-28 ",
            "Mcp-Method": "  tools/call\t",
            "Mcp-Name": "   count_memories  ",
        }
        reply = _raw_post(port, server.token(), body, headers)
        head, _, content = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), reply[:400]
        result = json.loads(content)["result"]
        assert result["isError"] is False
        assert result["resultType"] == "complete"
