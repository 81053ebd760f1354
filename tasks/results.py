"""Awaiting a message's result without blocking the event loop: one interface, two ways.

:class:`ResultsWaiter` sends a message and awaits the result its actor
stored, through the broker's own results backend. Which implementation a
process uses follows from its broker (``results_waiter``, called by the
composition root): Redis results are awaited with ``BRPOPLPUSH`` on an
asyncio client; in-process results (the StubBroker with
:class:`~tasks.broker.NotifyingStubBackend`) wake an asyncio future from the
worker thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import redis
import redis.asyncio as aredis
from dramatiq.message import Message
from redis.sentinel import MasterNotFoundError

from memory.errors import DATABASE_ERROR, MemoryServiceError

from .broker import BrokerBundle, NotifyingStubBackend
from .redis_clients import RedisTarget, async_client, close_async_client, no_retry
from .redis_probe import WritableProbe

#: Longest single blocking read while awaiting a result, in seconds. Short, so a waiter on
#: a master that froze notices within a slice (plus :data:`RESULT_READ_SLACK_S`) and, with
#: Sentinels, asks them for the new master (issue 33: 20-22 s with a 10 s slice).
WAIT_SLICE_S = 2.0
#: What a result read may take beyond its slice before the connection counts as stalled.
RESULT_READ_SLACK_S = 1.0
#: Seconds to connect to Redis (the master) for the results client.
RESULT_CONNECT_TIMEOUT_S = 2.0
#: Longest wait for one look-up of a write's receipt in PostgreSQL while its queue is in
#: trouble: a database that is stalled too must not hold the write's answer.
RECEIPT_LOOKUP_TIMEOUT_S = 1.0

_log = logging.getLogger(__name__)

#: Looks up the write's receipt (its committed answer) outside the queue; None while the
#: write has not committed. Given by the queue guard, which knows the database.
ReceiptLookup = Callable[[], Awaitable[dict[str, Any] | None]]


@dataclass(frozen=True)
class Settled:
    """A write answered by its receipt, not by the result a worker stores in Redis."""

    payload: dict[str, Any]


def queue_unreachable() -> MemoryServiceError:
    """Nothing was sent: the connection to the queue failed before the message left."""
    return MemoryServiceError(
        DATABASE_ERROR,
        "The write queue could not be reached, so nothing was stored. Try again shortly.",
        {"component": "queue"},
    )


def queue_refused(ex: redis.RedisError) -> MemoryServiceError:
    """Redis answered the send with an error: the message was not queued."""
    why = (
        "its Redis server is a read-only replica"
        if isinstance(ex, redis.ReadOnlyError)
        else f"its Redis server answered {type(ex).__name__}"
    )
    return MemoryServiceError(
        DATABASE_ERROR,
        f"The write queue refused the write ({why}), so nothing was stored. Try again shortly.",
        {"component": "queue"},
    )


def queue_stalled() -> MemoryServiceError:
    """The message may have been sent: Redis stopped answering while it was being queued.

    A stalled Redis (its machine paused, its packets dropped) may still deliver it
    when it comes back, so "nothing was stored" would be a lie (issue 33).
    """
    return MemoryServiceError(
        DATABASE_ERROR,
        "The write queue stopped answering while the write was being queued, so it may or "
        "may not be stored. Repeating the same call (with the same Idempotency-Key, if you "
        "sent one) is safe: it will not be stored twice, and answers what was stored.",
        {"component": "queue", "outcome": "unknown"},
    )


def message_dead_lettered() -> MemoryServiceError:
    """A worker refused the message (no actor of that name, or it failed outright)."""
    return MemoryServiceError(
        DATABASE_ERROR,
        "The write was queued, but the worker that took it could not run it (it was moved "
        "to the dead-letter queue: a worker of another release, or a failure in the "
        "worker). It was not applied by that worker; repeating the same call is safe and "
        "will not store it twice.",
        {"component": "worker", "outcome": "dead-lettered"},
    )


def write_timed_out(seconds: float) -> MemoryServiceError:
    return MemoryServiceError(
        DATABASE_ERROR,
        f"The write was queued but no worker finished it within {seconds:g} s. It may still be "
        "applied; repeating the same call is safe and will not store it twice.",
        {"component": "worker", "timeout_s": seconds},
    )


def message_lost() -> MemoryServiceError:
    """Redis holds neither the message, its result, nor a dead letter of it."""
    return MemoryServiceError(
        DATABASE_ERROR,
        "The write was queued, but the queue no longer holds it and no worker stored a "
        "result (its Redis server lost it: a failover or a restart without persistence). It "
        "may still have been applied; repeating the same call is safe and will not store it "
        "twice.",
        {"component": "queue", "outcome": "unknown"},
    )


class ResultsWaiter(Protocol):
    """Sends a message and awaits the raw result its actor stored."""

    async def send_and_wait(
        self, message: Message[Any], timeout_s: float, *, receipt: ReceiptLookup | None = None
    ) -> Any:
        """The stored result (to be unwrapped by the backend), or MemoryServiceError when
        the queue cannot be reached or no result comes in time.

        ``receipt``, when given, is asked once the wait has met a broken or stalled
        connection; a receipt it finds ends the wait as :class:`Settled`."""
        ...

    async def queue_depths(self) -> dict[str, int]:
        """Messages enqueued and not yet acknowledged, per declared queue."""
        ...

    async def check_ready(self) -> None:
        """Return when a message sent now would be queued; raise why not (``/readyz``)."""
        ...

    async def aclose(self) -> None: ...


class InProcessResults:
    """The StubBroker's waiter: the backend wakes an asyncio future as a result lands."""

    def __init__(self, bundle: BrokerBundle, backend: NotifyingStubBackend) -> None:
        self._broker: Any = bundle.broker
        self._backend = backend

    async def check_ready(self) -> None:
        return None  # an in-memory queue always takes a message

    async def send_and_wait(
        self, message: Message[Any], timeout_s: float, *, receipt: ReceiptLookup | None = None
    ) -> Any:
        # An in-memory queue never breaks: ``receipt`` is never needed.
        loop = asyncio.get_running_loop()
        done = asyncio.Event()
        key = self._backend.build_message_key(message)

        def wake() -> None:
            loop.call_soon_threadsafe(done.set)

        self._backend.add_waiter(key, wake)
        try:
            self._broker.enqueue(message)  # an in-memory queue: never blocks
            try:
                await asyncio.wait_for(done.wait(), timeout_s)
            except TimeoutError:
                raise write_timed_out(timeout_s) from None
        finally:
            self._backend.remove_waiter(key, wake)
        return self._backend.get_stored(key)

    async def queue_depths(self) -> dict[str, int]:
        broker = self._broker
        queues = sorted(broker.get_declared_queues() | broker.get_declared_delay_queues())
        return {name: broker.queues[name].qsize() for name in queues if name in broker.queues}

    async def aclose(self) -> None:
        return None


class RedisResults:
    """The Redis broker's waiter: ``BRPOPLPUSH`` on an asyncio client, in bounded slices."""

    def __init__(
        self, bundle: BrokerBundle, redis: RedisTarget, *, slice_s: float = WAIT_SLICE_S
    ) -> None:
        self._broker: Any = bundle.broker
        self._backend: Any = bundle.backend
        self._slice_s = slice_s
        self._target = redis
        # Built with the queue (it connects on the first write, on the serving loop):
        # results are awaited on asyncio, never on a thread. Reads may block for a
        # whole wait slice plus slack; one try each (the loop below is the retry).
        # From the broker's own target (tasks.redis_clients): with Sentinels it follows
        # the master through a failover as the broker's client does.
        self._aredis: aredis.Redis | None = async_client(
            redis,
            socket_connect_timeout=RESULT_CONNECT_TIMEOUT_S,
            socket_timeout=slice_s + RESULT_READ_SLACK_S,
            retry=no_retry(),
        )
        # The readiness probe: built once, its connections reused (tasks.redis_probe).
        self._probe = WritableProbe(redis)

    async def send_and_wait(
        self, message: Message[Any], timeout_s: float, *, receipt: ReceiptLookup | None = None
    ) -> Any:
        enqueued = await self._enqueue(message)
        assert self._aredis is not None, "the waiter is open"
        key = self._backend.build_message_key(message)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        raw = None
        broken = 0  # connections lost in a row (Sentinels: the master is being replaced)
        # Set by the first broken or stalled read. From then on the receipt is looked up
        # before every try: a worker that committed as the master froze can neither store
        # its result nor acknowledge the message until the Sentinels name a new master
        # (and dramatiq retries an acknowledgement only after 5 s), so the result may come
        # late or never while the answer is already in PostgreSQL (issue 33: 11.2 s).
        troubled = False
        try:
            # BRPOPLPUSH onto itself: the result stays for any other waiter (dramatiq's own
            # scheme). Waiting in slices keeps every socket read bounded.
            while raw is None:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                if troubled:
                    payload = await look_up_receipt(
                        receipt, min(RECEIPT_LOOKUP_TIMEOUT_S, remaining)
                    )
                    if payload is not None:
                        _log.info("a write was answered from its receipt: its result wait broke")
                        return Settled(payload)
                try:
                    if broken:
                        gone = await self._lost(enqueued, key)
                        if gone is not None:
                            raise gone  # e.g. the new master never received it
                    raw = await self._aredis.brpoplpush(
                        key, key, timeout=max(min(self._slice_s, remaining), 0.01)
                    )
                    broken = 0
                except (redis.ConnectionError, redis.TimeoutError):
                    # Broken, or stalled past its slice (the master froze): redis-py drops
                    # that connection, and the next command connects again (with Sentinels,
                    # to the master they name now). Keep waiting until the write's deadline:
                    # a thawed or new master may still deliver the result.
                    broken += 1
                    await self._forget_master()
                    if not troubled:
                        troubled = True
                        continue  # its receipt first, at once: no back-off before it
                    await asyncio.sleep(min(0.05 * 2**broken, 1.0, max(deadline - loop.time(), 0)))
                    continue
                if raw is None:
                    gone = await self._lost(enqueued, key)
                    if gone is not None:
                        raise gone
        except redis.RedisError as ex:
            raise MemoryServiceError(
                DATABASE_ERROR,
                "The write was queued but its result could not be read. It may still be applied; "
                "repeating the same call is safe and will not store it twice.",
                {"component": "queue"},
            ) from ex
        if raw is None:
            raise write_timed_out(timeout_s)
        return self._backend.encoder.decode(raw)

    async def _enqueue(self, message: Message[Any]) -> Message[Any]:
        """The message as enqueued (it carries its Redis id), or the queue's error.

        With Sentinels a broken or stalled connection (the master just changed, or
        froze) gets one more try: redis-py asks the Sentinels again only for a new
        command. Sending it twice can only queue it twice, and its receipt answers
        the second run. Every send is bounded by the broker client's timeouts
        (tasks.broker: connect 2 s, any answer 3 s).

        Which error answers says what is known: a failure to connect means nothing
        left, so nothing was stored; a failure after the command was sent (a stall,
        a reset) leaves the write's fate unknown (:func:`queue_stalled`).
        """
        tries = 2 if self._target.sentinel is not None else 1
        for attempt in range(tries):
            try:
                enqueued: Message[Any] = await asyncio.to_thread(self._broker.enqueue, message)
                return enqueued
            except (redis.ConnectionError, redis.TimeoutError) as ex:
                if self._target.sentinel is not None:
                    # Every pooled connection may lead to an old master that froze or is
                    # being demoted: the next send asks the Sentinels afresh.
                    await asyncio.to_thread(self._broker.client.connection_pool.disconnect)
                if attempt + 1 == tries:
                    raise (queue_unreachable() if nothing_sent(ex) else queue_stalled()) from ex
            except redis.RedisError as ex:
                # Answered with an error (READONLY, OOM, a script error): refused, not queued.
                raise queue_refused(ex) from ex
        raise AssertionError("unreachable")

    async def _forget_master(self) -> None:
        """With Sentinels, drop every results connection after one broke or stalled: the
        idle ones lead to the same old master (after a thaw it still takes commands until
        the Sentinels demote it), and only a new connection asks them where it is now."""
        if self._target.sentinel is not None and self._aredis is not None:
            await self._aredis.connection_pool.disconnect()

    async def check_ready(self) -> None:
        """The server, or the master the Sentinels name, says it is a master (not PING only:
        an old master back as a read-only replica answers PING and refuses every write)."""
        await self._probe.check()

    async def _lost(self, enqueued: Message[Any], result_key: str) -> MemoryServiceError | None:
        """Why no result can come, when Redis says so; None while one still may.

        Dramatiq keeps a message in ``<namespace>:<queue>.msgs`` (under the id its
        enqueue gave it) from enqueue until acknowledged, and a worker stores the
        result before it acknowledges; writes are never retried through a delay
        queue (``max_retries`` 0). A message a worker rejected is moved to
        ``<queue>.XQ.msgs`` (dead-lettered: :func:`message_dead_lettered`). None of
        the three, checked in this order, means the master that had the message
        lost it (it died before a replica received it). Without this check the
        caller would wait the whole write timeout.
        """
        assert self._aredis is not None, "the waiter is open"
        messages = f"{self._broker.namespace}:{enqueued.queue_name}.msgs"
        dead = f"{self._broker.namespace}:{enqueued.queue_name}.XQ.msgs"
        message_id = enqueued.options["redis_message_id"]
        async with self._aredis.pipeline(transaction=False) as pipe:
            pipe.hexists(messages, message_id)
            pipe.exists(result_key)
            pipe.hexists(dead, message_id)
            held, has_result, dead_lettered = await pipe.execute()
        if held or has_result:
            return None
        return message_dead_lettered() if dead_lettered else message_lost()

    async def queue_depths(self) -> dict[str, int]:
        """On Redis: waiting, prefetched by a worker, or running (dramatiq keeps each
        message in ``<namespace>:<queue>.msgs`` until it is acknowledged), delay queues
        included."""
        broker = self._broker
        queues = sorted(broker.get_declared_queues() | broker.get_declared_delay_queues())

        def read() -> list[int]:
            with broker.client.pipeline(transaction=False) as pipe:
                for name in queues:
                    pipe.hlen(f"{broker.namespace}:{name}.msgs")
                return [int(n) for n in pipe.execute()]

        return dict(zip(queues, await asyncio.to_thread(read), strict=True))

    async def aclose(self) -> None:
        if self._aredis is not None:
            await close_async_client(self._aredis)
            self._aredis = None
            await self._probe.aclose()


async def look_up_receipt(
    receipt: ReceiptLookup | None, timeout_s: float = RECEIPT_LOOKUP_TIMEOUT_S
) -> dict[str, Any] | None:
    """The write's receipt, or None: none yet, no way to look, or the database did not
    answer within ``timeout_s`` (the write's remaining wait, if shorter).

    A look-up that overruns is cancelled and left to end in the background (psycopg
    cancels its query; on a frozen server that can take seconds), never awaited.
    """
    if receipt is None:
        return None
    lookup = asyncio.ensure_future(receipt())
    done, _ = await asyncio.wait({lookup}, timeout=timeout_s)
    if not done:
        lookup.cancel()
        # Held until it ends: asyncio keeps only weak references to a running task.
        _abandoned.add(lookup)
        lookup.add_done_callback(_ignore_outcome)
        _log.debug("a write's receipt was not found within %g s", timeout_s)
        return None
    try:
        return lookup.result()
    except Exception as ex:
        # The database is failing too: keep waiting on the queue, which may still answer.
        _log.debug("could not look up a write's receipt: %s", type(ex).__name__)
        return None


#: Look-ups abandoned and still ending (see :func:`look_up_receipt`).
_abandoned: set[asyncio.Future[Any]] = set()


def _ignore_outcome(task: asyncio.Future[Any]) -> None:
    _abandoned.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log it as never retrieved


def nothing_sent(ex: redis.RedisError) -> bool:
    """Whether ``ex`` says the command stored nothing: connecting failed (redis-py's
    messages for that say "connecting to"), the Sentinels named no master, or the server
    refused it as a demoted master (READONLY, which a Sentinel-managed connection turns
    into "The previous master is now a slave")."""
    text = str(ex)
    return isinstance(ex, MasterNotFoundError) or "connecting to" in text or "now a slave" in text


def results_waiter(bundle: BrokerBundle) -> ResultsWaiter:
    """The waiter of ``bundle``'s broker: Redis when it has an address, else in-process."""
    if bundle.redis is not None:
        return RedisResults(bundle, bundle.redis)
    backend = bundle.backend
    assert isinstance(backend, NotifyingStubBackend), "an in-process bundle notifies its waiters"
    return InProcessResults(bundle, backend)
