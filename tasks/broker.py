"""The Dramatiq broker and results backend: Redis when configured, in-process otherwise.

``make_broker`` is called once by each composition root (``ownsona serve``,
``ownsona worker``, the tests); nothing connects at import time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dramatiq
import redis
from dramatiq.broker import MessageProxy
from dramatiq.brokers.redis import RedisBroker, _RedisConsumer
from dramatiq.brokers.stub import StubBroker
from dramatiq.common import compute_backoff
from dramatiq.errors import ConnectionClosed
from dramatiq.message import Message
from dramatiq.middleware import AsyncIO
from dramatiq.results import Results
from dramatiq.results.backends import RedisBackend, StubBackend

from .redis_clients import (
    RedisSettingsRefused,
    RedisTarget,
    check_sentinels,
    close_sync_client,
    no_retry_sync,
    sync_client,
)

#: Default namespace of our keys in Redis (QUEUE_NAMESPACE changes it).
NAMESPACE = "ownsona"
#: Results outlive the longest write wait.
RESULT_TTL_MS = 10 * 60 * 1000
#: Commands per million that run queue maintenance (see make_broker).
MAINTENANCE_CHANCE = 100_000
#: Seconds the broker's client waits to connect to Redis, and for any one answer (issue 33).
BROKER_CONNECT_TIMEOUT_S = 2.0
BROKER_SOCKET_TIMEOUT_S = 3.0
#: Wake-up tokens kept per queue; more would only cause empty fetches.
_MAX_WAKE_TOKENS = 64


def _wake_key(namespace: str, queue_name: str) -> str:
    return f"{namespace}:wake:{queue_name}"


class _WakingConsumer(_RedisConsumer):
    """A Redis consumer that sleeps on a wake-up list instead of a timer.

    Dramatiq's Redis consumer polls with exponential back-off up to the
    worker timeout, so a write arriving at an idle worker waited up to a
    second. Here an idle consumer blocks on ``BLPOP`` of a wake-up list
    that every enqueue pushes to: the message is picked up at once, and an
    idle worker still costs no polling.
    """

    def __next__(self):  # type: ignore[no-untyped-def]
        # The fetch path of dramatiq's _RedisConsumer.__next__; only the idle wait differs.
        try:
            while True:
                try:
                    data = self.message_cache.pop(0)
                    if data is None:
                        continue
                    self.misses = 0
                    message = Message.decode(data)
                    self.queued_message_ids.add(message.message_id)
                    return MessageProxy(message)
                except IndexError:
                    if self.outstanding_message_count >= self.prefetch:
                        # Busy: the worker threads hold all we may take.
                        self.misses, backoff_ms = compute_backoff(
                            self.misses, max_backoff=self.timeout
                        )
                        time.sleep(backoff_ms / 1000)
                        return None
                    self.message_cache = self.broker.do_fetch(
                        self.queue_name, self.prefetch - self.outstanding_message_count
                    )
                    if not self.message_cache:
                        self.broker.client.blpop(
                            [_wake_key(self.broker.namespace, self.queue_name)],
                            timeout=max(self.timeout / 1000, 0.01),
                        )
                        return None
        except redis.ConnectionError as ex:
            raise ConnectionClosed(ex) from None  # type: ignore[no-untyped-call]  # dramatiq leaves this unannotated


class WakingRedisBroker(RedisBroker):
    """RedisBroker whose idle consumers wake up as soon as a message is enqueued."""

    @property
    def consumer_class(self):  # type: ignore[no-untyped-def]
        return _WakingConsumer

    def enqueue(self, message, *, delay=None):  # type: ignore[no-untyped-def]
        enqueued = super().enqueue(message, delay=delay)
        if delay is None:
            with self.client.pipeline(transaction=False) as pipe:
                key = _wake_key(self.namespace, message.queue_name)
                pipe.lpush(key, 1)
                pipe.ltrim(key, 0, _MAX_WAKE_TOKENS - 1)
                pipe.execute()
        return enqueued

    def close(self) -> None:
        super().close()
        # Dramatiq leaves the client open; ours may hold Sentinel connections too.
        close_sync_client(self.client)


class NotifyingStubBackend(StubBackend):
    """The in-process results backend; it tells waiters the moment a result lands."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.results = {}  # per instance, not the class-wide dict StubBackend shares
        self._lock = threading.Lock()
        self._waiters: dict[str, list[Callable[[], None]]] = {}

    def add_waiter(self, message_key: str, wake: Callable[[], None]) -> None:
        with self._lock:
            self._waiters.setdefault(message_key, []).append(wake)

    def remove_waiter(self, message_key: str, wake: Callable[[], None]) -> None:
        with self._lock:
            waiters = self._waiters.get(message_key, [])
            if wake in waiters:
                waiters.remove(wake)
            if not waiters:
                self._waiters.pop(message_key, None)

    def get_stored(self, message_key: str) -> Any:
        return self._get(message_key)  # type: ignore[no-untyped-call]  # dramatiq leaves this unannotated

    def _store(self, message_key: str, result: Any, ttl: int) -> None:
        super()._store(message_key, result, ttl)  # type: ignore[no-untyped-call]  # dramatiq leaves this unannotated
        with self._lock:
            waiters = list(self._waiters.get(message_key, []))
        for wake in waiters:
            wake()


class BrokerUnreachable(Exception):
    """Redis did not answer a PING (address, password, TLS settings, no master)."""


class BrokerRefused(BrokerUnreachable):
    """The Redis settings name what is not there (Sentinels that don't know the master)."""


@dataclass
class BrokerBundle:
    broker: dramatiq.Broker
    backend: Any  # RedisBackend | NotifyingStubBackend
    #: Where Redis is (tasks.redis_clients); None: the in-process broker.
    redis: RedisTarget | None

    @property
    def in_process(self) -> bool:
        """True for the in-memory broker: results arrive through the backend's waiters."""
        return isinstance(self.backend, NotifyingStubBackend)


def make_broker(
    redis: RedisTarget | str | None,
    *,
    namespace: str = NAMESPACE,
    heartbeat_timeout_ms: int = 15_000,
    extra_middleware: list[Any] | None = None,
) -> BrokerBundle:
    """Build (and set as Dramatiq's global) the broker for this process.

    ``redis`` is a :class:`~tasks.redis_clients.RedisTarget` (REDIS_URL or
    Sentinels), or a bare URL. TLS comes from the URL: ``rediss://`` plus
    redis-py's query options (``ssl_cert_reqs``, ``ssl_ca_certs``,
    ``ssl_certfile``, ``ssl_keyfile``), so the broker, the results backend
    (same client) and the write queue's asyncio client (same target,
    ``tasks.queue``) all get the same settings. With Sentinels the client is
    Sentinel-managed and follows a failover by itself (``tasks.redis_clients``).
    """
    target = RedisTarget.of(redis)
    if target is not None:
        client = sync_client(
            target,
            socket_connect_timeout=BROKER_CONNECT_TIMEOUT_S,
            # Every command is bounded (an idle consumer's BLPOP waits at most the worker
            # timeout, 1 s): a stalled Redis fails a send instead of hanging the caller.
            socket_timeout=BROKER_SOCKET_TIMEOUT_S,
            # One try: the web process decides what a failed send means (tasks.results);
            # redis-py resending a timed-out enqueue would only queue it twice.
            retry=no_retry_sync(),
            health_check_interval=30,
        )
        broker: dramatiq.Broker = WakingRedisBroker(  # type: ignore[no-untyped-call]  # dramatiq leaves this unannotated
            client=client,
            namespace=namespace,
            heartbeat_timeout=heartbeat_timeout_ms,
            # Maintenance (redelivering a dead worker's messages) on 10% of
            # commands instead of 0.1%: an idle worker fetches about once a
            # second, so redelivery follows the heartbeat timeout within seconds.
            maintenance_chance=MAINTENANCE_CHANCE,
        )
        backend: Any = RedisBackend(client=client, namespace=f"{namespace}-results")
    else:
        broker = StubBroker()
        backend = NotifyingStubBackend(namespace=f"{namespace}-results")
    broker.add_middleware(
        Results(backend=backend, result_ttl=RESULT_TTL_MS)  # type: ignore[no-untyped-call]  # dramatiq leaves this unannotated
    )
    extra = list(extra_middleware or [])
    # A worker's resources middleware runs the actors' event loop itself
    # (tasks.actors.WorkerResources); otherwise Dramatiq's AsyncIO does.
    if not any(isinstance(m, AsyncIO) for m in extra):
        broker.add_middleware(AsyncIO())
    for middleware in extra:
        broker.add_middleware(middleware)
    dramatiq.set_broker(broker)
    return BrokerBundle(broker=broker, backend=backend, redis=target)


def check_broker(bundle: BrokerBundle) -> None:
    """PING Redis once (nothing to do in-process); raise :class:`BrokerUnreachable`.

    With Sentinels, first check that they know the master's name: a wrong
    name raises :class:`BrokerRefused` with the names they do know.
    """
    if not isinstance(bundle.broker, RedisBroker) or bundle.redis is None:
        return
    try:
        check_sentinels(bundle.redis)
        bundle.broker.client.ping()
    except RedisSettingsRefused as ex:
        raise BrokerRefused(str(ex)) from ex
    except redis.RedisError as ex:
        raise BrokerUnreachable(str(ex) or type(ex).__name__) from ex
