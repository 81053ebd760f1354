"""A TCP proxy that fails the way real networks and paused machines do (issue 33).

Refused ports fail in a millisecond; real outages stall. :class:`StallProxy`
listens on a local port and forwards to a target, in one of four modes,
switchable at run time from any thread:

- ``pass``: bytes flow both ways; bytes held while stalled are delivered now
  (a thawed machine answers what it was sent, as a SIGCONT'd Redis does);
- ``refuse``: every connection is reset, new ones at once (a crashed process);
- ``blackhole``: new connections are accepted and never answered; the ones
  already open keep flowing (a host whose new connections vanish, e.g. a
  silent Sentinel met by a fresh probe);
- ``freeze``: nothing moves either way on any connection, old or new, and
  nothing is closed (SIGSTOP of the machine, or a link that drops every packet).

The proxy runs its own event loop on a thread, so a test may block on a
synchronous client (the broker's) while the proxy keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Literal

Mode = Literal["pass", "refuse", "blackhole", "freeze"]

_CHUNK = 65536


class StallProxy:
    """``127.0.0.1:port`` forwarding to ``target_host:target_port`` (module docstring)."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self._target = (target_host, target_port)
        self._mode: Mode = "pass"
        self._loop = asyncio.new_event_loop()
        self._changed: asyncio.Condition | None = None  # made on the proxy's loop
        self._open: set[tuple[asyncio.StreamWriter, ...]] = set()
        self._held: set[asyncio.StreamWriter] = set()  # accepted while stalled, not yet joined
        self._serving: set[asyncio.Task[None]] = set()  # one per accepted connection
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.port = 0
        #: Connections accepted so far (a test can tell whether a client came at all).
        self.accepted = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def mode(self) -> Mode:
        return self._mode

    def start(self) -> StallProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        return self

    def set_mode(self, mode: Mode) -> None:
        """Switch at once (returns when the proxy's loop has applied it)."""
        asyncio.run_coroutine_threadsafe(self._apply(mode), self._loop).result(10)

    @contextlib.contextmanager
    def stalled(self, mode: Mode = "freeze") -> Iterator[StallProxy]:
        """``mode`` for the block, then ``pass`` again."""
        self.set_mode(mode)
        try:
            yield self
        finally:
            self.set_mode("pass")

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> StallProxy:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # --- on the proxy's loop ---------------------------------------------------

    async def _listen(self) -> None:
        self._changed = asyncio.Condition()
        self._server = await asyncio.start_server(self._one, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _apply(self, mode: Mode) -> None:
        self._mode = mode
        await self._notify()
        if mode == "refuse":
            for writers in list(self._open):
                for writer in writers:
                    _reset(writer)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for writers in list(self._open):
            for writer in writers:
                _reset(writer)
        for writer in list(self._held):
            _reset(writer)
        self._mode = "refuse"
        await self._notify()  # every held pump and connection gives up
        if self._serving:  # let each close its sockets before the loop goes
            await asyncio.wait(self._serving, timeout=2)

    async def _notify(self) -> None:
        assert self._changed is not None
        async with self._changed:
            self._changed.notify_all()

    async def _until(self, *modes: Mode) -> Mode:
        """Wait until the mode is one of ``modes`` or ``refuse``; return it."""
        assert self._changed is not None
        async with self._changed:
            await self._changed.wait_for(lambda: self._mode in (*modes, "refuse"))
        return self._mode

    async def _one(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.accepted += 1
        task = asyncio.current_task()
        assert task is not None
        self._serving.add(task)
        try:
            await self._serve(client_r, client_w)
        finally:
            self._serving.discard(task)

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        if self._mode == "refuse":
            _reset(client_w)
            return
        # Accepted while stalled (blackhole or freeze): held until the mode is pass again.
        self._held.add(client_w)
        try:
            mode = await self._until("pass")
        finally:
            self._held.discard(client_w)
        if mode == "refuse":
            _reset(client_w)
            return
        try:
            upstream_r, upstream_w = await asyncio.open_connection(*self._target)
        except OSError:
            _reset(client_w)
            return
        pair = (client_w, upstream_w)
        self._open.add(pair)
        try:
            await asyncio.gather(
                self._pump(client_r, upstream_w, client_w),
                self._pump(upstream_r, client_w, upstream_w),
                return_exceptions=True,
            )
        finally:
            self._open.discard(pair)

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        other: asyncio.StreamWriter,
    ) -> None:
        try:
            while chunk := await reader.read(_CHUNK):
                # An open connection flows in pass and blackhole, holds its bytes in freeze.
                if await self._until("pass", "blackhole") == "refuse":
                    return
                writer.write(chunk)
                await writer.drain()
        finally:
            with contextlib.suppress(Exception):
                writer.close()
            with contextlib.suppress(Exception):
                other.close()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with an RST (SO_LINGER 0): the peer sees the connection refused or reset."""
    sock = writer.get_extra_info("socket")
    with contextlib.suppress(Exception):
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(Exception):
        writer.close()
