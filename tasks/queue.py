"""The API side of a queued write: send the message, await its result without blocking.

The result is the worker's payload, passed on as it is: a domain error was
turned into its payload once, on the worker; only the queue's own failures
(unreachable, no answer in time) are raised here, for ``api/errors.py``.

The event loop never waits on a socket or a lock: Redis results are awaited
with ``BRPOPLPUSH`` on an asyncio client; in-process results wake an asyncio
future from the worker thread.
"""

from __future__ import annotations

import asyncio
from typing import Any

import redis
import redis.asyncio as aredis
from dramatiq.results import ResultFailure

from memory import writers
from memory.commands import Command
from memory.errors import DATABASE_ERROR, INTERNAL_ERROR, MemoryServiceError
from memory.request_ids import current_request_id
from memory.writes import with_submission

from .actors import Actors
from .broker import BrokerBundle, NotifyingStubBackend


def queue_unreachable() -> MemoryServiceError:
    return MemoryServiceError(
        DATABASE_ERROR,
        "The write queue could not be reached, so nothing was stored. Try again shortly.",
        {"component": "queue"},
    )


def write_timed_out(seconds: float) -> MemoryServiceError:
    return MemoryServiceError(
        DATABASE_ERROR,
        f"The write was queued but no worker finished it within {seconds:g} s. It may still be "
        "applied; repeating the same call is safe and will not store it twice.",
        {"component": "worker", "timeout_s": seconds},
    )


#: Longest single blocking read while awaiting a result, in seconds.
_WAIT_SLICE_S = 10.0


class DramatiqWriteQueue:
    """Implements ``api.runtime.WriteQueue`` over a :class:`BrokerBundle`."""

    def __init__(self, bundle: BrokerBundle, actors: Actors, *, timeout_s: float) -> None:
        self._bundle = bundle
        self._actor = actors.run_use_case
        self._timeout_s = timeout_s
        # Built with the queue (it connects on the first write, on the serving loop):
        # results are awaited on asyncio, never on a thread. Reads may block for a
        # whole wait slice (below) plus network slack.
        self._aredis: aredis.Redis | None = (
            aredis.Redis.from_url(
                bundle.redis_url, socket_connect_timeout=5, socket_timeout=_WAIT_SLICE_S + 10
            )
            if bundle.redis_url
            else None
        )

    async def submit(self, command: Command, user_id: int, idempotency_key: str) -> dict[str, Any]:
        """Run ``command`` on a worker and return its payload, ``{"ok": false}`` ones included.

        The message carries the command's JSON (:meth:`memory.commands.Command.to_json`)
        under its tool's name. Raises MemoryServiceError only when the queue itself
        fails: unreachable, no result in time.
        """
        # The request id rides in the message options (not the arguments: they are
        # the actor's signature) so the worker's log lines carry it too.
        # A window key travels with this submission's id, so that a redelivery of this
        # message is told from a client's retry (memory.writes.with_submission).
        idempotency_key = with_submission(idempotency_key)
        request_id = current_request_id()
        options: dict[str, Any] = {"request_id": request_id} if request_id else {}
        # The app the write speaks for rides the same way (memory.writers): the worker's
        # insert records it; a message without it (an older web process's) still runs.
        options.update(writers.to_options(writers.current_writer()))
        message = self._actor.message_with_options(
            args=(command.TOOL, user_id, command.to_json(), idempotency_key), **options
        )
        backend = self._bundle.backend
        if isinstance(backend, NotifyingStubBackend):
            data = await self._run_in_process(message, backend)
        else:
            data = await self._run_on_redis(message, backend)
        try:
            payload: dict[str, Any] = backend.unwrap_result(data)
        except ResultFailure as ex:
            raise MemoryServiceError(INTERNAL_ERROR, "An unexpected error occurred.") from ex
        # An error payload is the worker's answer (tasks.actors built it): passed on as it is.
        return payload

    async def _run_in_process(self, message: Any, backend: NotifyingStubBackend) -> Any:
        loop = asyncio.get_running_loop()
        done = asyncio.Event()
        key = backend.build_message_key(message)

        def wake() -> None:
            loop.call_soon_threadsafe(done.set)

        backend.add_waiter(key, wake)
        try:
            self._bundle.broker.enqueue(message)  # an in-memory queue: never blocks
            try:
                await asyncio.wait_for(done.wait(), self._timeout_s)
            except TimeoutError:
                raise write_timed_out(self._timeout_s) from None
        finally:
            backend.remove_waiter(key, wake)
        return backend.get_stored(key)

    async def _run_on_redis(self, message: Any, backend: Any) -> Any:
        try:
            await asyncio.to_thread(self._bundle.broker.enqueue, message)
        except redis.RedisError as ex:
            raise queue_unreachable() from ex
        assert self._aredis is not None, "a Redis bundle has its results client"
        key = backend.build_message_key(message)
        deadline = asyncio.get_running_loop().time() + self._timeout_s
        raw = None
        try:
            # BRPOPLPUSH onto itself: the result stays for any other waiter (dramatiq's own
            # scheme). Waiting in slices keeps every socket read bounded.
            while raw is None:
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    break
                raw = await self._aredis.brpoplpush(key, key, timeout=min(_WAIT_SLICE_S, remaining))
        except redis.RedisError as ex:
            raise MemoryServiceError(
                DATABASE_ERROR,
                "The write was queued but its result could not be read. It may still be applied; "
                "repeating the same call is safe and will not store it twice.",
                {"component": "queue"},
            ) from ex
        if raw is None:
            raise write_timed_out(self._timeout_s)
        return backend.encoder.decode(raw)

    async def queue_depths(self) -> dict[str, int]:
        """Messages enqueued and not yet acknowledged, per declared queue (metrics).

        On Redis: waiting, prefetched by a worker, or running (dramatiq keeps
        each message in ``<namespace>:<queue>.msgs`` until it is acknowledged),
        delay queues included. In-process: the messages still waiting.
        """
        # A RedisBroker here, or a StubBroker: each is read through its own attributes.
        broker: Any = self._bundle.broker
        queues = sorted(broker.get_declared_queues() | broker.get_declared_delay_queues())
        if self._bundle.in_process:
            return {name: broker.queues[name].qsize() for name in queues if name in broker.queues}

        def read() -> list[int]:
            with broker.client.pipeline(transaction=False) as pipe:
                for name in queues:
                    pipe.hlen(f"{broker.namespace}:{name}.msgs")
                return [int(n) for n in pipe.execute()]

        return dict(zip(queues, await asyncio.to_thread(read), strict=True))

    async def aclose(self) -> None:
        if self._aredis is not None:
            await self._aredis.aclose()
            self._aredis = None
