"""A plain MCP client for the benchmarks: JSON-RPC ``tools/call`` POSTs to ``/mcp``."""

from __future__ import annotations

from typing import Any

import httpx


def tools_call(request_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The JSON-RPC request calling ``tool`` with ``arguments``."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


class McpClient:
    """``tools/call`` with a bearer token; a failed call ends the benchmark (SystemExit)."""

    def __init__(self, url: str, token: str, *, timeout_s: float = 600) -> None:
        self.http = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=timeout_s
        )
        self.next_id = 0

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        reply = self.http.post("/mcp", json=tools_call(self.next_id, tool, arguments))
        reply.raise_for_status()
        body = reply.json()
        if "error" in body:
            raise SystemExit(f"{tool}: JSON-RPC error {body['error']}")
        payload: dict[str, Any] = body["result"]["structuredContent"]
        if not payload.get("ok"):
            raise SystemExit(f"{tool} failed: {payload}")
        return payload

    def close(self) -> None:
        self.http.close()
