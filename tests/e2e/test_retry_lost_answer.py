"""A write whose answer is lost on the way back, retried by the official SDK client.

A running ``ownsona serve`` sits behind a small TCP proxy. The proxy relays
everything, except that the first connection carrying a ``remember_batch``
has its answer swallowed: the proxy sees the server's response arrive (so
the write committed), then closes the client's socket instead of relaying it.
The client does what MCP 2026-07-28 tells it to (Streamable HTTP, "a broken
response stream loses the in-flight request; clients MUST re-issue it as a
new request with a new request ID"): a new client, a new call, the same
arguments. Then PostgreSQL is counted: one copy of every text, one
downweight of the memory the batch demoted, one receipt, and the retry's
answer is the first one's (its items say "Ok", not "Already remembered").

Control: with ``IDEMPOTENCY_WINDOW_S=0`` the same retry writes again (the
demoted memory is demoted twice), which is what the window prevents.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.opened_rows import memory_texts

from .server import run_processes


class AnswerDropper:
    """A TCP proxy that loses the answer to the first ``remember_batch`` it forwards."""

    def __init__(self, upstream_port: int) -> None:
        self._upstream_port = upstream_port
        self._server: asyncio.Server | None = None
        self.dropped = asyncio.Event()
        self.port = 0
        #: Every byte each side sent through the proxy, for the test to read.
        self.requests = bytearray()
        self.responses = bytearray()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[AnswerDropper]:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._upstream_port)
        armed = asyncio.Event()

        async def to_server() -> None:
            while chunk := await reader.read(65536):
                self.requests += chunk
                if not self.dropped.is_set() and b"remember_batch" in chunk:
                    armed.set()
                up_writer.write(chunk)
                await up_writer.drain()

        async def to_client() -> None:
            while chunk := await up_reader.read(65536):
                if armed.is_set() and not self.dropped.is_set():
                    # The server answered, so the write committed: lose the answer.
                    self.dropped.set()
                    return
                self.responses += chunk
                writer.write(chunk)
                await writer.drain()

        tasks = [asyncio.create_task(to_server()), asyncio.create_task(to_client())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            for w in (writer, up_writer):
                w.transport.abort()


def _client(url: str, token: str, mode: str) -> tuple[httpx2.AsyncClient, Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    client = Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode)  # type: ignore[arg-type]
    return http, client


def _state(dsn: str, paris_id: int) -> dict[str, Any]:
    texts = Counter(text for _, text in memory_texts(dsn, "m.deleted_at IS NULL")).items()
    with psycopg.connect(dsn) as conn:
        salience = conn.execute("SELECT salience FROM memories WHERE id = %s", (paris_id,))
        receipts = conn.execute(
            "SELECT count(*) FROM write_receipts WHERE tool = 'RememberBatch'"
        ).fetchone()
        return {
            "copies": dict(texts),
            "paris_salience": salience.fetchone()[0],  # type: ignore[index]
            "batch_receipts": receipts[0] if receipts else None,
        }


async def _lose_then_retry(url: str, token: str, mode: str, dsn: str) -> dict[str, Any]:
    port = int(url.rsplit(":", 1)[1])
    http, client = _client(url, token, mode)
    async with http, client:
        paris = await client.call_tool("remember", {"text": "I live in Paris."})
        paris_id = paris.structured_content["memory_id"]  # type: ignore[index]
    batch = {
        "items": [
            {"text": "I moved from Paris to Lisbon in March.", "downweights": [paris_id]},
            {"text": "My cat is called Miso."},
        ]
    }
    before = _state(dsn, paris_id)

    async with AnswerDropper(port).running() as proxy:
        proxied = f"http://127.0.0.1:{proxy.port}"
        http, client = _client(proxied, token, mode)
        with pytest.raises(Exception):  # noqa: B017 - whatever the SDK raises: the answer never came
            async with http, client:
                await client.call_tool("remember_batch", batch)
        assert proxy.dropped.is_set()
        committed = _state(dsn, paris_id)

        # The client re-issues the call: new client, new request id, same arguments.
        http, client = _client(proxied, token, mode)
        async with http, client:
            assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
            retried = await client.call_tool("remember_batch", batch)
        wire = {"requests": bytes(proxy.requests), "responses": bytes(proxy.responses).lower()}
    after = _state(dsn, paris_id)
    return {
        "wire": wire,
        "before": before,
        "committed": committed,
        "after": after,
        "retried": retried.structured_content,
    }


@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
async def test_a_retried_batch_whose_answer_was_lost_is_stored_once(
    tmp_path: Any, dsn: str, clean_db: str, mode: str
) -> None:
    with run_processes(tmp_path, {"DATABASE_URL": dsn}) as server:
        seen = await _lose_then_retry(server.url, server.token(), mode, dsn)
    committed, after = seen["committed"], seen["after"]
    # The lost call did commit: both texts and the downweight are there.
    assert committed["copies"]["My cat is called Miso."] == 1
    assert committed["paris_salience"] < seen["before"]["paris_salience"]
    # The retry stored nothing more and changed nothing.
    assert after == committed
    assert after["batch_receipts"] == 1
    items = seen["retried"]["results"]
    assert [item["message"] for item in items] == ["Ok", "Ok"]
    # 2026-07-28: no fallback to initialize, no session; 2025-11-25: both.
    wire = seen["wire"]
    modern = mode == "auto"
    assert (b'"initialize"' in wire["requests"]) is not modern
    assert (b"mcp-session-id" in wire["responses"]) is not modern
    if modern:
        assert b'"server/discover"' in wire["requests"]
    assert b"authorization: bearer " in wire["requests"].lower()


async def test_without_the_window_the_same_retry_writes_again(
    tmp_path: Any, dsn: str, clean_db: str
) -> None:
    env = {"DATABASE_URL": dsn, "IDEMPOTENCY_WINDOW_S": "0"}
    with run_processes(tmp_path, env) as server:
        seen = await _lose_then_retry(server.url, server.token(), "auto", dsn)
    # Exact texts are never stored twice, but the retry ran again: a second
    # downweight, a second receipt, and "Already remembered" for both items.
    assert seen["after"]["paris_salience"] < seen["committed"]["paris_salience"]
    assert seen["after"]["batch_receipts"] == 2
    assert [i["message"] for i in seen["retried"]["results"]] == ["Already remembered"] * 2
