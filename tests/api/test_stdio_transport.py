"""The stdio transport in-process: framing, notifications, cancellation, batches, shutdown.

The dispatcher is the real one over the real tool registry; what the tools
do is the fake use-case table of ``tests/api/conftest.py`` (or one that
holds a call until the test lets it go), so these tests are about the
transport. ``tests/e2e/test_stdio_sdk.py`` runs the real process with the
official SDK's stdio client.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from api.mcp.dispatch import McpDispatcher
from api.mcp.stdio import _OVERSIZED, LineFramer, OutputClosed, StdioServer
from api.mcp.tools import tool_specs
from api.runtime import Runtime
from config.settings import Settings
from memory.calls import CallMeta
from memory.commands import Command, Recall
from memory.deps import Deps
from tests.api.conftest import FakeUseCases


class Pipe:
    """Standard input and output of the server, as the test sees them."""

    def __init__(self) -> None:
        self._chunks: asyncio.Queue[bytes] = asyncio.Queue()
        self.lines: list[bytes] = []
        self._arrived = asyncio.Condition()
        self.closed_output = False
        self.eof_read = asyncio.Event()

    async def read(self) -> bytes:
        chunk = await self._chunks.get()
        if not chunk:
            self.eof_read.set()
        return chunk

    def write(self, data: bytes) -> None:
        if self.closed_output:
            raise OutputClosed
        assert data.endswith(b"\n") and data.count(b"\n") == 1, data
        self.lines.append(data)
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._arrived:
            self._arrived.notify_all()

    def send(self, *messages: Any) -> None:
        for message in messages:
            raw = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
            self._chunks.put_nowait(raw)

    def eof(self) -> None:
        self._chunks.put_nowait(b"")

    def replies(self) -> list[Any]:
        return [json.loads(line) for line in self.lines]

    async def wait_for(self, count: int) -> list[Any]:
        async with self._arrived:
            await asyncio.wait_for(self._arrived.wait_for(lambda: len(self.lines) >= count), 10)
        return self.replies()


class HeldUseCases(FakeUseCases):
    """Inline tools wait for :attr:`release` before answering (so a call is in flight)."""

    def __init__(self) -> None:
        super().__init__()
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.finished: list[str] = []

    async def __call__(self, deps: Deps, meta: CallMeta, command: Command) -> dict[str, Any]:
        self.started.set()
        await self.release.wait()
        self.finished.append(type(command).__name__)
        return {"ok": True, "matches": []}


def _server(runtime: Runtime, settings: Settings, use_cases: Any, **options: Any) -> StdioServer:
    dispatcher = McpDispatcher(
        tool_specs(settings), use_cases, deps=runtime.deps, write_queue=runtime.write_queue
    )
    return StdioServer(
        dispatcher,
        user_id=42,
        max_line_bytes=options.pop("max_line_bytes", settings.max_body_bytes),
        max_batch=settings.max_batch_size,
        **options,
    )


def _request(id: int | str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def _initialize(version: str = "2025-11-25") -> dict[str, Any]:
    return _request(
        0,
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    )


def _recall(id: int | str) -> dict[str, Any]:
    return _request(id, "tools/call", {"name": "recall", "arguments": {"query": "tea"}})


async def _serve_all(server: StdioServer, pipe: Pipe) -> list[Any]:
    """Serve until end of input (already queued) and return every reply."""
    await asyncio.wait_for(server.serve(pipe.read, pipe.write, asyncio.Event()), 10)
    return pipe.replies()


async def test_requests_are_answered_one_line_each_and_notifications_not_at_all(
    runtime: Runtime, api_settings: Settings, use_cases: FakeUseCases
) -> None:
    pipe = Pipe()
    pipe.send(
        _initialize(),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        _request(1, "tools/list"),
        # A client response (we never ask anything): ignored.
        {"jsonrpc": "2.0", "id": 99, "result": {}},
        _recall("two"),
    )
    pipe.eof()
    replies = await _serve_all(_server(runtime, api_settings, use_cases), pipe)

    by_id = {r["id"]: r for r in replies}
    assert sorted(by_id, key=str) == [0, 1, "two"]
    assert by_id[0]["result"]["protocolVersion"] == "2025-11-25"
    assert {t["name"] for t in by_id[1]["result"]["tools"]} >= {"remember", "recall"}
    assert by_id["two"]["result"]["isError"] is False
    # The user is the one the process was started for.
    assert use_cases.calls == [("Recall", 42, Recall.parse({"query": "tea"}, api_settings))]


async def test_framing_tolerates_crlf_blank_lines_and_messages_split_across_reads(
    runtime: Runtime, api_settings: Settings, use_cases: FakeUseCases
) -> None:
    pipe = Pipe()
    raw = json.dumps(_request(1, "ping")).encode()
    pipe.send(b"\n\r\n", raw[:7], raw[7:] + b"\r\n", json.dumps(_request(2, "ping")).encode())
    pipe.eof()  # the last line has no newline: still a message
    replies = await _serve_all(_server(runtime, api_settings, use_cases), pipe)
    assert sorted(r["id"] for r in replies) == [1, 2]
    assert all(r["result"] == {} for r in replies)


async def test_bad_lines_get_errors_with_the_id_when_there_is_one(
    runtime: Runtime, api_settings: Settings, use_cases: FakeUseCases
) -> None:
    pipe = Pipe()
    pipe.send(
        b"{not json\n",
        {"jsonrpc": "1.0", "id": 5, "method": "ping"},
        _request(6, "no/such/method"),
    )
    pipe.eof()
    replies = await _serve_all(_server(runtime, api_settings, use_cases), pipe)
    codes = {r["id"]: r["error"]["code"] for r in replies}
    assert codes == {None: -32700, 5: -32600, 6: -32601}


async def test_an_oversized_line_is_refused_and_the_next_one_served(
    runtime: Runtime, api_settings: Settings, use_cases: FakeUseCases
) -> None:
    pipe = Pipe()
    huge = json.dumps(_request(1, "ping", {"pad": "x" * 5000})).encode()
    # Sent in pieces, as a pipe delivers it: never buffered whole.
    pipe.send(huge[:3000], huge[3000:] + b"\n", json.dumps(_request(2, "ping")).encode() + b"\n")
    pipe.eof()
    server = _server(runtime, api_settings, use_cases, max_line_bytes=1024)
    replies = await _serve_all(server, pipe)
    assert replies[0]["id"] is None and replies[0]["error"]["code"] == -32600
    assert "1024 bytes" in replies[0]["error"]["message"]
    assert replies[1] == {"jsonrpc": "2.0", "id": 2, "result": {}}


def test_the_framer_drops_a_long_line_once_and_keeps_the_rest() -> None:
    framer = LineFramer(4)
    assert framer.feed(b"ab\ncdefgh") == [b"ab", _OVERSIZED]
    assert framer.feed(b"ij\nkl") == []  # the rest of the long line is dropped
    assert framer.feed(b"m\n") == [b"klm"]
    assert framer.feed(b"nop") == []
    assert framer.finish() == [b"nop"]
    assert framer.finish() == []


async def test_a_cancelled_request_gets_no_answer_and_others_still_do(
    runtime: Runtime, api_settings: Settings
) -> None:
    held = HeldUseCases()
    pipe = Pipe()
    server = _server(runtime, api_settings, held)
    serving = asyncio.create_task(server.serve(pipe.read, pipe.write, asyncio.Event()))
    pipe.send(_initialize(), _recall(1))
    await asyncio.wait_for(held.started.wait(), 10)
    # Requests run concurrently: a ping is answered while the recall is held.
    pipe.send(_request(2, "ping"))
    replies = await pipe.wait_for(2)
    assert [r["id"] for r in replies] == [0, 2]

    pipe.send(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
        _request(3, "ping"),
    )
    replies = await pipe.wait_for(3)
    pipe.eof()
    await asyncio.wait_for(serving, 10)
    assert [r["id"] for r in pipe.replies()] == [0, 2, 3]
    assert held.finished == []  # stopped, not finished


async def test_end_of_input_answers_the_requests_already_read(
    runtime: Runtime, api_settings: Settings
) -> None:
    held = HeldUseCases()
    pipe = Pipe()
    server = _server(runtime, api_settings, held)
    serving = asyncio.create_task(server.serve(pipe.read, pipe.write, asyncio.Event()))
    pipe.send(_recall(1))
    await asyncio.wait_for(held.started.wait(), 10)
    pipe.eof()
    await asyncio.wait_for(pipe.eof_read.wait(), 10)
    assert not serving.done()  # still draining: the recall is in flight
    held.release.set()
    await asyncio.wait_for(serving, 10)
    assert [r["id"] for r in pipe.replies()] == [1]
    assert held.finished == ["Recall"]


async def test_stop_ends_the_session_without_end_of_input(
    runtime: Runtime, api_settings: Settings, use_cases: FakeUseCases
) -> None:
    pipe = Pipe()
    stop = asyncio.Event()
    server = _server(runtime, api_settings, use_cases)
    serving = asyncio.create_task(server.serve(pipe.read, pipe.write, stop))
    pipe.send(_request(1, "ping"))
    await pipe.wait_for(1)
    stop.set()  # SIGTERM
    await asyncio.wait_for(serving, 10)
    assert [r["id"] for r in pipe.replies()] == [1]


async def test_stop_is_heard_while_every_slot_is_taken(
    runtime: Runtime, api_settings: Settings
) -> None:
    held = HeldUseCases()
    pipe = Pipe()
    stop = asyncio.Event()
    server = _server(runtime, api_settings, held, max_in_flight=1, stop_grace_s=0.05)
    serving = asyncio.create_task(server.serve(pipe.read, pipe.write, stop))
    pipe.send(_recall(1), _recall(2))  # the second waits for the first's slot
    await asyncio.wait_for(held.started.wait(), 10)
    stop.set()
    await asyncio.wait_for(serving, 10)
    # The held call was cancelled after the grace; the waiting one never ran.
    assert pipe.lines == [] and held.finished == []


async def test_output_closing_ends_the_session(
    runtime: Runtime, api_settings: Settings, use_cases: FakeUseCases
) -> None:
    pipe = Pipe()
    pipe.closed_output = True
    server = _server(runtime, api_settings, use_cases)
    serving = asyncio.create_task(server.serve(pipe.read, pipe.write, asyncio.Event()))
    pipe.send(_request(1, "ping"))  # its answer cannot be written: the server stops reading
    await asyncio.wait_for(serving, 10)
    assert pipe.lines == []


@pytest.mark.parametrize("version", ["2025-03-26"])
async def test_batches_are_served_at_2025_03_26(
    runtime: Runtime, api_settings: Settings, use_cases: FakeUseCases, version: str
) -> None:
    pipe = Pipe()
    pipe.send(
        _initialize(version),
        [
            _request(1, "ping"),
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0"},
            _initialize(version) | {"id": 3},
        ],
        [{"jsonrpc": "2.0", "method": "notifications/initialized"}],
    )
    pipe.eof()
    replies = await _serve_all(_server(runtime, api_settings, use_cases), pipe)
    assert replies[0]["result"]["protocolVersion"] == version
    batch = replies[1]
    assert isinstance(batch, list) and len(batch) == 3
    assert batch[0] == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert batch[1]["id"] is None and batch[1]["error"]["code"] == -32600
    assert batch[2]["id"] == 3 and "cannot be batched" in batch[2]["error"]["message"]
    assert len(replies) == 2  # the batch of one notification got no answer


async def test_batches_are_refused_after_a_later_version_is_negotiated(
    runtime: Runtime, api_settings: Settings, use_cases: FakeUseCases
) -> None:
    pipe = Pipe()
    pipe.send(_initialize("2025-06-18"), [_request(1, "ping"), _request(2, "ping")])
    pipe.eof()
    replies = await _serve_all(_server(runtime, api_settings, use_cases), pipe)
    assert replies[1]["id"] is None and replies[1]["error"]["code"] == -32600
    assert "2025-06-18 has no batches" in replies[1]["error"]["message"]


async def test_a_batch_naming_a_modern_version_in_meta_is_refused(
    runtime: Runtime, api_settings: Settings, use_cases: FakeUseCases
) -> None:
    meta = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
    pipe = Pipe()
    pipe.send([_request(1, "tools/list", meta), _request(2, "tools/list", meta)])
    pipe.eof()
    replies = await _serve_all(_server(runtime, api_settings, use_cases), pipe)
    assert len(replies) == 1 and replies[0]["error"]["code"] == -32600
    assert "2026-07-28 has no batches" in replies[0]["error"]["message"]
