"""What the web process does when its write queue fails: say why, and answer from receipts.

:class:`GuardedWriteQueue` wraps the write queue (``api.runtime.WriteQueue``)
and adds two things the queue itself cannot:

- **A write caught in a Redis failover is answered from its receipt** as
  soon as the wait for its result meets a broken or stalled connection
  (``tasks.results``), not only once the queue gives up on it (issue 33).
- **A retry whose first attempt committed gets its first answer**, even
  while Redis is down: every write's answer is stored as a receipt in
  PostgreSQL in the write's own transaction (``memory.writes``). When the
  queue fails, the receipt of the same idempotency key is looked up there
  before the queue's error is answered (issue 29, item 3).
- **The cause is logged** when writes start failing (the exception's class
  and message: a Redis error names the address, never a password), at
  ERROR once, then at WARNING at most every :data:`REPEAT_LOG_S` seconds
  with the count, and once more when writes get through again. Without it a
  web process whose Redis became a read-only replica logged nothing above
  INFO while every write failed.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

import redis

from memory.errors import MemoryServiceError
from memory.writes import prior_receipt

from .results import ReceiptLookup

if TYPE_CHECKING:
    from memory.calls import CallMeta
    from memory.commands import Command
    from memory.deps import Deps

_log = logging.getLogger(__name__)

#: Seconds between two log lines about the same run of failures.
REPEAT_LOG_S = 10.0


class _Queue(Protocol):
    async def submit(
        self, meta: CallMeta, command: Command, *, receipt: ReceiptLookup | None = None
    ) -> dict[str, Any]: ...

    async def queue_depths(self) -> dict[str, int]: ...

    async def check_ready(self) -> None: ...


class GuardedWriteQueue:
    """A write queue whose failures are logged and, when already done, answered by receipt."""

    def __init__(self, queue: _Queue, deps: Deps, *, clock: Any = time.monotonic) -> None:
        self._queue = queue
        self._deps = deps
        self._failures = FailureLog(clock)

    async def queue_depths(self) -> dict[str, int]:
        """The wrapped queue's backlog (``/metrics``)."""
        return await self._queue.queue_depths()

    async def check_ready(self) -> None:
        """The wrapped queue's readiness (``/readyz``)."""
        await self._queue.check_ready()

    async def submit(self, meta: CallMeta, command: Command) -> dict[str, Any]:
        async def committed_answer() -> dict[str, Any] | None:
            # Raises when the database fails too; the waiter then keeps waiting on Redis.
            return await prior_receipt(self._deps, meta.user_id, meta.idempotency_key)

        try:
            payload = await self._queue.submit(meta, command, receipt=committed_answer)
        except MemoryServiceError as ex:
            # By the queue's contract this is the queue's own failure (unreachable,
            # no result in time), never the write's: a receipt may still exist.
            self._failures.failed(ex)
            receipt = await self._receipt(meta)
            if receipt is None:
                raise
            _log.info("a queued write's first answer was returned from its receipt")
            return receipt
        self._failures.succeeded()
        return payload

    async def _receipt(self, meta: CallMeta) -> dict[str, Any] | None:
        try:
            return await prior_receipt(self._deps, meta.user_id, meta.idempotency_key)
        except Exception as ex:
            # The database is down too: the queue's error is the answer.
            _log.warning("could not look up the write's receipt: %s", type(ex).__name__)
            return None


class FailureLog:
    """Logs a run of queue failures: the first at ERROR, then a summary now and then."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._clock = clock
        self._count = 0
        self._last_logged = 0.0

    def failed(self, ex: MemoryServiceError) -> None:
        self._count += 1
        now = self._clock()
        if self._count == 1:
            _log.error("writes are failing: %s", describe_cause(ex))
            self._last_logged = now
        elif now - self._last_logged >= REPEAT_LOG_S:
            _log.warning(
                "writes are still failing (%d since the first): %s",
                self._count,
                describe_cause(ex),
            )
            self._last_logged = now

    def succeeded(self) -> None:
        if self._count:
            _log.warning("writes get through again after %d failed", self._count)
            self._count = 0


def describe_cause(ex: MemoryServiceError) -> str:
    """What went wrong, for an operator: the answer's message and the error under it."""
    cause = ex.__cause__
    where = (ex.detail or {}).get("component", "queue")
    if cause is None:
        return f"{where}: {ex.message}"
    text = f"{where}: {type(cause).__name__}: {cause}"
    if isinstance(cause, redis.ReadOnlyError):
        text += (
            " (the Redis server this process writes to is a read-only replica: point "
            "REDIS_URL at the master, or use REDIS_SENTINELS to follow failovers)"
        )
    return text
