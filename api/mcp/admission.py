"""Which tool calls run now: reads that embed nothing never queue behind query embeddings.

With many clients, one process's event loop and the local model share two
cores (issue 16). Left alone, every request waits in the same queue, so a
``get_memory`` waited as long as a ``recall`` (250-300 ms p50 with 50 clients
on 2 cores), though it needs a millisecond of work. :class:`Admission` gives
the cheap calls priority:

- a *light* call (an inline read that embeds nothing: ``list_memories``,
  ``get_memory``, ``count_memories``, ``text_search``...) always runs at once;
- a call that embeds a query (``recall``, ``search_memory``,
  ``build_context_prompt``) runs at once too, unless light calls are being
  made (one ran within the last :data:`LIGHT_WINDOW_S`) and ``busy_limit``
  query calls already run: then it waits its turn, first come first served.
  Queued writes are not held here: their work is the worker's, and a write
  waiting for a slow worker must not hold recalls up.

The limit has to hold for as long as light calls keep coming, not only while
one runs: admitted calls cannot be paused, so a light call arriving after a
burst of admitted queries would wait behind all of them. When no light call
has been made for a while there is no limit: a burst of recalls is embedded in
as few model runs as the embedder can batch (``Coalescer``), which is what a
recall-only load wants. Measured in BENCHMARKS.md (issue 16).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Iterator

__all__ = ["LIGHT_WINDOW_S", "Admission"]

#: Light calls made within this many seconds keep the query limit on.
LIGHT_WINDOW_S = 1.0


class Admission:
    """Counts the calls in flight on one event loop; holds query calls back while light ones come.

    ``busy_limit`` 0 (or less) turns the limit off: every call runs at once.
    """

    def __init__(self, busy_limit: int, *, light_window_s: float = LIGHT_WINDOW_S) -> None:
        self._busy_limit = busy_limit
        self._light_window_s = light_window_s
        self._light = 0
        self._light_seen: float | None = None  # loop time a light call last ended
        self._queries = 0
        self._waiting: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        """Query calls waiting for their turn now."""
        return sum(1 for f in self._waiting if not f.done())

    @contextlib.asynccontextmanager
    async def call(self, *, embeds_query: bool, light: bool) -> AsyncIterator[None]:
        """Run one tool call as its kind asks: a query call waits its turn, a light one
        is counted, any other (a queued write) runs untouched."""
        if embeds_query:
            async with self.query():
                yield
        elif light:
            with self.light():
                yield
        else:
            yield

    @contextlib.contextmanager
    def light(self) -> Iterator[None]:
        """Run a light call: at once, holding query calls to ``busy_limit`` meanwhile."""
        self._light += 1
        try:
            yield
        finally:
            self._light -= 1
            self._light_seen = asyncio.get_running_loop().time()

    @contextlib.asynccontextmanager
    async def query(self) -> AsyncIterator[None]:
        """Run a call that embeds a query, once it is its turn."""
        await self._enter()
        try:
            yield
        finally:
            self._queries -= 1
            self._admit()

    def _has_room(self) -> bool:
        if self._busy_limit <= 0 or self._queries < self._busy_limit:
            return True
        # Over the limit: room only while light calls are not being made.
        if self._light > 0:
            return False
        seen = self._light_seen
        return seen is None or asyncio.get_running_loop().time() - seen > self._light_window_s

    async def _enter(self) -> None:
        if not self._waiting and self._has_room():
            self._queries += 1
            return
        loop = asyncio.get_running_loop()
        turn: asyncio.Future[None] = loop.create_future()
        self._waiting.append(turn)
        # Light calls may stop coming while the admitted queries are still running
        # (waiting for a connection, an embedder timeout): once the window has passed
        # there is no limit, and the queue must not wait for a query to end to see it.
        loop.call_later(self._light_window_s, self._admit)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                # Admitted, then cancelled before running: the slot goes to the next in line.
                self._queries -= 1
                self._admit()
            else:
                with contextlib.suppress(ValueError):
                    self._waiting.remove(turn)
            raise

    def _admit(self) -> None:
        """Let waiting query calls in, oldest first, while there is room."""
        while self._waiting and self._has_room():
            turn = self._waiting.popleft()
            if not turn.done():  # a cancelled waiter's turn is skipped
                self._queries += 1
                turn.set_result(None)
