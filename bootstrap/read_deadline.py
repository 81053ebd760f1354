"""A client-side deadline on every read's database wait (issue 33, READ_TIMEOUT).

A PostgreSQL server that froze (SIGSTOP, a paused machine) still has its
kernel acknowledge what it is sent, so neither the server's
``statement_timeout`` nor ``tcp_user_timeout`` ends a query waiting on it:
only the client can. :func:`bounded_reads` runs each read command with a
view of its pool that counts the time the read holds or awaits a
connection; once that reaches the deadline, the read is answered
:func:`read_timed_out` (``DATABASE_ERROR``) and changes nothing.

Only database time counts: a recall that waits on a slow embedding provider
is that provider's to bound (``EMBEDDING_TIMEOUT``), and is never blamed on
the database.

The abandoned read is cancelled in the background, never awaited: psycopg
then sends the server a cancel request, bounded at 5 s, waits at most 5 s
more for the query to end, and otherwise closes the connection. A connection
that comes back to the pool mid-query or closed is discarded by the pool, so
none is handed out again half-used; the pool connects anew when the server
answers again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from memory.calls import CallMeta
from memory.commands import Command
from memory.deps import Deps
from memory.errors import DATABASE_ERROR, MemoryServiceError
from memory.handlers import read_commands

if TYPE_CHECKING:
    from api.runtime import CommandRunner

__all__ = ["DatabaseClock", "bounded_reads", "read_timed_out"]


def read_timed_out(seconds: float) -> MemoryServiceError:
    """What a read answers when the database did not answer it within ``seconds``."""
    return MemoryServiceError(
        DATABASE_ERROR,
        f"The database did not answer this read within {seconds:g} s (READ_TIMEOUT): its "
        "server is stalled or overloaded. Nothing was changed; repeating the call is safe.",
        {"component": "database", "timeout_s": seconds},
    )


class DatabaseClock:
    """Seconds spent holding or awaiting a database connection (nested blocks count once)."""

    def __init__(self) -> None:
        self._open = 0
        self._since = 0.0
        self._spent = 0.0

    def enter(self) -> None:
        if self._open == 0:
            self._since = time.monotonic()
        self._open += 1

    def leave(self) -> None:
        self._open -= 1
        if self._open == 0:
            self._spent += time.monotonic() - self._since

    def spent(self) -> float:
        running = time.monotonic() - self._since if self._open else 0.0
        return self._spent + running


class _ClockedPool:
    """``pool`` for one read: its ``connection()`` blocks run on ``clock``; the rest is the pool's."""

    def __init__(self, pool: AsyncConnectionPool, clock: DatabaseClock) -> None:
        self._pool = pool
        self._clock = clock

    @asynccontextmanager
    async def connection(self, timeout: float | None = None) -> AsyncIterator[AsyncConnection]:
        self._clock.enter()
        try:
            async with self._pool.connection(timeout) as conn:
                yield conn
        finally:
            self._clock.leave()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)


def bounded_reads(
    run: CommandRunner,
    deadline_s: float,
    reads: tuple[type[Command], ...] | None = None,
) -> CommandRunner:
    """``run`` with each read command's database wait bounded by ``deadline_s``.

    ``reads``: the commands bounded; by default those whose handlers only read. Writes
    run as they are (they have WRITE_TIMEOUT and their own answers).
    """
    read_only = read_commands() if reads is None else reads

    async def bounded(deps: Deps, meta: CallMeta, command: Command) -> dict[str, Any]:
        if not isinstance(command, read_only):
            return await run(deps, meta, command)
        clock = DatabaseClock()
        pool = cast(AsyncConnectionPool, _ClockedPool(deps.pool, clock))
        read = asyncio.ensure_future(run(dataclasses.replace(deps, pool=pool), meta, command))
        try:
            # The clock runs at most as fast as time does: until the rest of the budget has
            # passed, the deadline cannot have come.
            while not read.done() and (left := deadline_s - clock.spent()) > 0:
                await asyncio.wait({read}, timeout=left)
        except BaseException:
            _abandon(read)  # the caller went away (cancelled): so does its read
            raise
        if read.done():  # also when it finished just as the budget ran out
            return read.result()
        _abandon(read)
        raise read_timed_out(deadline_s)

    return bounded


def _abandon(read: asyncio.Future[Any]) -> None:
    """Cancel ``read`` without waiting for it: psycopg's cancel of a frozen server's query
    takes up to 10 s (module docstring), which is what the deadline saves the caller."""
    read.cancel()
    read.add_done_callback(_retrieve)


def _retrieve(read: asyncio.Future[Any]) -> None:
    if not read.cancelled():
        read.exception()  # retrieved: an abandoned read's error is expected, not news
