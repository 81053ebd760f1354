"""MCP over standard input and output: newline-delimited JSON-RPC for one local user.

The stdio transport (MCP 2026-07-28, ``basic/transports/stdio.mdx``; the
same framing in 2025-03-26 .. 2025-11-25), as thin as it can be around
:class:`~api.mcp.dispatch.McpDispatcher`, which does the MCP work for HTTP
too:

- One JSON-RPC message per line, UTF-8, no embedded newlines; a trailing
  ``\\r`` and blank lines are tolerated. A line longer than
  ``MAX_BODY_BYTES`` is answered with -32600 (id null) and skipped, never
  buffered whole.
- Everything written is a JSON-RPC response, one per line; the caller
  makes sure nothing else reaches standard output (logs go to stderr).
- Requests run concurrently (at most ``max_in_flight``; reading waits
  beyond that) and are answered as they finish, correlated by id;
  ``initialize`` alone is answered before the next line is read.
- Notifications and client responses get no answer. ``notifications/
  cancelled`` stops the named request and nothing is sent for it (the
  initialize request is never cancelled, per the spec's Cancellation page);
  a queued write already handed to a worker may still complete.
- Batches (JSON arrays) exist only in 2025-03-26: served while no other
  version has been negotiated by ``initialize`` or named in an element's
  ``_meta``, refused with -32600 otherwise, as over HTTP. ``initialize``
  cannot be batched.
- The caller ends the session by closing input (end of file: the requests
  already read are answered first) or by setting ``stop`` (SIGTERM: they
  get :data:`STOP_GRACE_S` seconds, then are cancelled).

There is no bearer token: whoever can start this process can reach the
database it uses. The user is fixed when the process starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from api.errors import internal_jsonrpc_error
from api.mcp import jsonrpc, versions
from api.mcp.dispatch import CallContext, McpDispatcher
from api.mcp.jsonrpc import INVALID_REQUEST, Invalid, JsonRpcError, Message

logger = logging.getLogger("ownsona.api.mcp.stdio")

#: Seconds in-flight requests get to finish after ``stop`` (SIGTERM) before they are cancelled.
STOP_GRACE_S = 5.0
#: Requests handled at once; reading pauses beyond this.
DEFAULT_MAX_IN_FLIGHT = 8

_T = TypeVar("_T")

#: Reads the next chunk of input; ``b""`` at end of file.
ReadChunk = Callable[[], Awaitable[bytes]]
#: Writes one encoded message (a line, newline included) and flushes it.
WriteLine = Callable[[bytes], None]


class OutputClosed(Exception):
    """Standard output is gone (the client closed its end): nothing more can be said."""


class _Oversized:
    """A line that exceeded the cap; its bytes were dropped."""


_OVERSIZED = _Oversized()


class LineFramer:
    """Splits a byte stream into lines of at most ``max_line`` bytes, dropping longer ones."""

    def __init__(self, max_line: int) -> None:
        self._max = max_line
        self._buffer = bytearray()
        self._discarding = False

    def feed(self, chunk: bytes) -> list[bytes | _Oversized]:
        """The lines completed by ``chunk`` (a too-long line comes out once, as a marker)."""
        lines: list[bytes | _Oversized] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if not self._discarding:
                self._buffer += piece
                if len(self._buffer) > self._max:
                    self._buffer.clear()
                    self._discarding = True
                    lines.append(_OVERSIZED)
            if end < 0:
                return lines
            if not self._discarding:
                lines.append(bytes(self._buffer))
            self._buffer.clear()
            self._discarding = False
            start = end + 1

    def finish(self) -> list[bytes | _Oversized]:
        """At end of file: the last line, if it had no newline."""
        rest, self._buffer = bytes(self._buffer), bytearray()
        return [rest] if rest.strip() and not self._discarding else []


class StdioServer:
    """Serves one user's MCP session over a pair of byte streams."""

    def __init__(
        self,
        dispatcher: McpDispatcher,
        *,
        user_id: int,
        max_line_bytes: int,
        max_batch: int,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        stop_grace_s: float = STOP_GRACE_S,
    ) -> None:
        self._dispatcher = dispatcher
        self._stop_grace_s = stop_grace_s
        self._max_line = max_line_bytes
        self._max_batch = max_batch
        self._slots = asyncio.Semaphore(max_in_flight)
        # One process is one session: a retried request (same id, same arguments) within it
        # is recognised by the write's idempotency key, as over HTTP with Mcp-Session-Id.
        self._ctx = CallContext(
            user_id=user_id, session_id=f"stdio-{secrets.token_hex(16)}", entry="stdio"
        )
        self._version: str | None = None
        self._in_flight: dict[jsonrpc.RequestId, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._write: WriteLine | None = None
        self._output_closed = asyncio.Event()

    async def serve(self, read: ReadChunk, write: WriteLine, stop: asyncio.Event) -> None:
        """Answer every request read until end of file, ``stop``, or output closing."""
        self._write = write
        framer = LineFramer(self._max_line)
        stopped = False
        try:
            while not self._output_closed.is_set():
                chunk = await _first(read(), stop, self._output_closed)
                if chunk is None:
                    stopped = True
                    break
                lines = framer.feed(chunk) if chunk else framer.finish()
                for line in lines:
                    if not await self._take(line, stop):
                        stopped = True
                        break
                if not chunk or stopped:
                    break
        finally:
            await self._drain(self._stop_grace_s if stopped else None)

    async def _take(self, line: bytes | _Oversized, stop: asyncio.Event) -> bool:
        """Handle one line: notifications at once, requests as tasks (waiting for a slot).

        False when ``stop`` was set while every slot was taken: the line is
        dropped unanswered, as a request in flight when a process ends is lost.
        """
        if isinstance(line, _Oversized):
            message = f"Invalid Request: a message is at most {self._max_line} bytes."
            self._send(jsonrpc.error(None, JsonRpcError(INVALID_REQUEST, message)))
            return True
        if not line.strip():
            return True
        try:
            parsed = jsonrpc.parse_body(line)
        except JsonRpcError as ex:
            self._send(jsonrpc.error(None, ex))
            return True
        if isinstance(parsed, Invalid):
            self._send(jsonrpc.error(parsed.id, parsed.error))
            return True
        if isinstance(parsed, Message) and parsed.kind != "request":
            self._notice(parsed)
            return True
        if await _first(self._slots.acquire(), stop) is None:
            return False
        task = asyncio.create_task(self._run(parsed))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if isinstance(parsed, Message) and parsed.method == "initialize":
            # Answered before the next line is read: the version it negotiates decides
            # how later messages (batches) are served. The spec's Cancellation page: the
            # initialize request MUST NOT be cancelled, so it is never in _in_flight.
            await task
        elif isinstance(parsed, Message) and parsed.id is not None:
            self._in_flight[parsed.id] = task
        return True

    async def _run(self, parsed: Message | list[Message | Invalid]) -> None:
        try:
            if isinstance(parsed, list):
                reply: Any = await self._batch(parsed)
            else:
                reply = await self._handle(parsed)
            if reply is not None:
                self._send(reply)
        except asyncio.CancelledError:
            pass  # cancelled by the client, or by shutdown: nothing is sent for it
        except Exception as ex:  # never leave a request unanswered
            request_id = parsed.id if isinstance(parsed, Message) else None
            self._send(jsonrpc.error(request_id, internal_jsonrpc_error(ex)))
        finally:
            self._slots.release()
            request_id = parsed.id if isinstance(parsed, Message) else None
            if request_id is not None and self._in_flight.get(request_id) is asyncio.current_task():
                del self._in_flight[request_id]

    async def _handle(self, message: Message) -> dict[str, Any]:
        outcome = await self._dispatcher.handle(message, self._ctx)
        if message.method == "initialize":
            result = outcome.response.get("result")
            if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
                self._version = result["protocolVersion"]
                # The connection is the session: MCP Apps for it iff this client offered it.
                self._ctx = dataclasses.replace(self._ctx, apps=outcome.apps)
        return outcome.response

    async def _batch(self, items: list[Message | Invalid]) -> list[dict[str, Any]] | dict[str, Any]:
        version = self._version or _declared_version(items)
        try:
            allowed = versions.rules_for(version).batches
        except JsonRpcError:
            allowed = False  # a version we lack has no batches either
        if not allowed:
            message = f"Invalid Request: protocol version {version} has no batches."
            return jsonrpc.error(None, JsonRpcError(INVALID_REQUEST, message))
        if len(items) > self._max_batch:
            message = f"Invalid Request: at most {self._max_batch} messages per batch."
            return jsonrpc.error(None, JsonRpcError(INVALID_REQUEST, message))
        responses: list[dict[str, Any]] = []
        for item in items:
            if isinstance(item, Invalid):
                responses.append(jsonrpc.error(item.id, item.error))
            elif item.kind != "request":
                self._notice(item)
            elif item.method == "initialize":
                # 2025-03-26, Lifecycle: initialize MUST NOT be part of a batch.
                message = "Invalid Request: initialize cannot be batched."
                responses.append(jsonrpc.error(item.id, JsonRpcError(INVALID_REQUEST, message)))
            else:
                responses.append(await self._handle(item))
        # JSON-RPC 2.0 §6: a batch of notifications only gets no answer at all.
        return responses

    def _notice(self, message: Message) -> None:
        """A notification or client response: only cancellation does anything."""
        if message.kind != "notification" or message.method != "notifications/cancelled":
            return
        params = message.params if isinstance(message.params, dict) else {}
        request_id = params.get("requestId")
        if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
            return
        task = self._in_flight.get(request_id)
        if task is not None:
            task.cancel()

    def _send(self, reply: dict[str, Any] | list[dict[str, Any]]) -> None:
        if not reply or self._output_closed.is_set() or self._write is None:
            return
        try:
            data = jsonrpc.encode(reply)
        except ValueError as ex:  # a non-finite float in a result: still a JSON-RPC answer
            request_id = reply.get("id") if isinstance(reply, dict) else None
            data = jsonrpc.encode(jsonrpc.error(request_id, internal_jsonrpc_error(ex)))
        try:
            self._write(data + b"\n")
        except OutputClosed:
            logger.info("stdio: standard output closed; stopping")
            self._output_closed.set()

    async def _drain(self, grace_s: float | None) -> None:
        """Let the requests in flight finish (within ``grace_s``), then cancel what is left."""
        pending = set(self._tasks)
        if pending:
            _, late = await asyncio.wait(pending, timeout=grace_s)
            for task in late:
                task.cancel()
            if late:
                await asyncio.gather(*late, return_exceptions=True)


def _declared_version(items: list[Message | Invalid]) -> str | None:
    """A version named in a batch element's ``_meta`` (2026-07-28 style), if any."""
    for item in items:
        version = versions.meta_version(item.params) if isinstance(item, Message) else None
        if isinstance(version, str):
            return version
    return None


async def _first(read: Awaitable[_T], *events: asyncio.Event) -> _T | None:
    """What ``read`` returns, or None (``read`` cancelled) if one of ``events`` is set first."""
    reading = asyncio.ensure_future(read)
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait([reading, *waiters], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
    if reading.done():
        return reading.result()
    reading.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await reading
    return None
