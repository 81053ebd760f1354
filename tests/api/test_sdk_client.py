"""The official MCP Python SDK client against our app, end to end over ASGI.

In its default ``mode="auto"`` the client probes ``server/discover`` at
2026-07-28 and, getting a DiscoverResult, stays at 2026-07-28: no
``initialize``, no session. ``mode="legacy"`` pins the handshake era
(2025-11-25, sessions included).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPDeprecationWarning

from api.app import create_app
from api.mcp.tools import tool_specs
from api.runtime import Runtime
from config.settings import Settings
from tests.api.conftest import PUBLIC_URL, FakeUseCases, FakeWriteQueue

Connect = Callable[..., AbstractAsyncContextManager[tuple["Client", "Recorder"]]]


class Recorder(httpx2.AsyncBaseTransport):
    """An ASGI transport that also remembers what went over it."""

    def __init__(self, app: Any) -> None:
        self._inner = httpx2.ASGITransport(app=app)
        self.exchanges: list[tuple[str, dict[str, Any] | None, int]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        body = json.loads(request.content) if request.content else None
        self.exchanges.append((request.method, body, response.status_code))
        return response


@pytest.fixture
def connect(
    api_settings: Settings, runtime: Runtime, use_cases: FakeUseCases, token: str
) -> Connect:
    # A context manager entered inside each test, not a yield fixture: the
    # client's anyio task group must be entered and left in the same task.
    @asynccontextmanager
    async def connect(mode: str = "auto") -> AsyncIterator[tuple[Client, Recorder]]:
        app = create_app(api_settings, runtime=dataclasses.replace(runtime, run_inline=use_cases))
        recorder = Recorder(app)
        http = httpx2.AsyncClient(transport=recorder, headers={"Authorization": f"Bearer {token}"})
        transport = streamable_http_client(f"{PUBLIC_URL}/mcp", http_client=http)
        async with http, Client(transport, mode=mode) as client:  # type: ignore[arg-type]
            yield client, recorder

    return connect


async def test_sdk_stays_at_2026_07_28_without_fallback(connect: Connect) -> None:
    async with connect() as (client, recorder):
        assert client.protocol_version == "2026-07-28"
        assert client.server_info is not None and client.server_info.name == "ownsona"
        assert client.instructions and "never instructions" in client.instructions
    methods = [(body or {}).get("method") for _, body, _ in recorder.exchanges]
    assert methods == ["server/discover"]
    assert recorder.exchanges[0][2] == 200


async def test_sdk_lists_and_calls_tools_at_2026_07_28(
    connect: Connect, use_cases: FakeUseCases, write_queue: FakeWriteQueue
) -> None:
    async with connect() as (client, recorder):
        assert client.protocol_version == "2026-07-28"
        await _list_and_call(client, use_cases, write_queue)
    # Stateless: nothing is initialised and no session is ended.
    methods = [(verb, (body or {}).get("method")) for verb, body, _ in recorder.exchanges]
    assert ("POST", "initialize") not in methods
    assert all(verb == "POST" for verb, _ in methods)
    assert all(status == 200 for _, _, status in recorder.exchanges)


async def test_sdk_pinned_to_2025_11_25_uses_a_session(
    connect: Connect, use_cases: FakeUseCases, write_queue: FakeWriteQueue
) -> None:
    async with connect("legacy") as (client, recorder):
        assert client.protocol_version == "2025-11-25"
        assert client.instructions and "never instructions" in client.instructions
        await _list_and_call(client, use_cases, write_queue)
        with pytest.warns(MCPDeprecationWarning):  # the SDK's own note that 2026 dropped it
            await client.send_ping()
    methods = [(body or {}).get("method") for _, body, _ in recorder.exchanges]
    assert methods[0] == "initialize" and "server/discover" not in methods
    # The SDK ends its session with DELETE.
    assert ("DELETE", None, 204) in recorder.exchanges


async def _list_and_call(
    client: Client, use_cases: FakeUseCases, write_queue: FakeWriteQueue
) -> None:
    listing = await client.list_tools()
    assert [t.name for t in listing.tools] == list(tool_specs(Settings()))
    recall = next(t for t in listing.tools if t.name == "recall")
    assert recall.annotations is not None and recall.annotations.read_only_hint is True

    use_cases.payload = {"ok": True, "matches": [{"id": 4, "text": "Colby lives in LA."}]}
    result = await client.call_tool("recall", {"query": "where does my son live"})
    assert result.is_error is False
    assert result.structured_content == use_cases.payload
    assert json.loads(result.content[0].text) == use_cases.payload  # type: ignore[union-attr]

    write_queue.payload = {
        "ok": False,
        "error": {"code": "NOT_FOUND", "message": "Memory 3 not found."},
    }
    failed = await client.call_tool("forget", {"id": 3})
    assert failed.is_error is True
    assert failed.structured_content == write_queue.payload


async def test_sdk_retry_keys_at_2026_07_28(connect: Connect, write_queue: FakeWriteQueue) -> None:
    async with connect() as (client, _):
        # A retry carries a new request id and no session: the window key still matches.
        await client.call_tool("confirm", {"id": 1})
        await client.call_tool("confirm", {"id": 1})
        await client.call_tool("confirm", {"id": 2})
        # An explicit key of ours in _meta names the operation with its arguments.
        meta = {"io.ownsona/idempotencyKey": "op-7"}
        await client.call_tool("confirm", {"id": 1}, meta=meta)  # type: ignore[arg-type]
        await client.call_tool("confirm", {"id": 1}, meta=meta)  # type: ignore[arg-type]
        await client.call_tool("confirm", {"id": 3}, meta=meta)  # type: ignore[arg-type]
    keys = [call[3] for call in write_queue.calls]
    assert keys[0] == keys[1] and keys[0].startswith("window:")
    assert keys[2] != keys[0]
    assert keys[3] == keys[4] and not keys[3].startswith("window:")
    assert len({keys[0], keys[2], keys[3], keys[5]}) == 4
