"""The Dramatiq internals OwnSona relies on, pinned to the version we tested (dramatiq 2.2).

``tasks.broker`` subclasses the private ``_RedisConsumer`` (its ``__next__``
is a copy of Dramatiq's fetch path with another idle wait) and
``StubBackend`` (``_store``/``_get``); ``tasks.shutdown`` and ``tasks.queue``
use ``do_requeue``, the ``redis_message_id`` option and Redis's key layout;
``tasks.queue`` reads results the way ``RedisBackend`` stores them (a list
per message key, read with ``BRPOPLPUSH`` onto itself); ``tasks.actors``'
``WorkerResources`` extends the ``AsyncIO`` middleware and runs coroutines on
its event-loop thread.
pyproject pins ``dramatiq[redis]>=2.2,<2.3``. When one of these tests fails
after an upgrade, re-read the named Dramatiq code against ours, bring ours
in line, then update the recorded hash or attribute list here.
"""

from __future__ import annotations

import hashlib
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

import dramatiq
import pytest
import redis
from dramatiq.asyncio import get_event_loop_thread
from dramatiq.brokers.redis import RedisBroker, _RedisConsumer
from dramatiq.middleware import AsyncIO
from dramatiq.results.backends import RedisBackend, StubBackend

from tasks.broker import WakingRedisBroker, _WakingConsumer
from tests.conftest import QUEUE_NAMESPACE

#: sha256 (first 16 hex digits) of the dedented source of the code we copied or override.
SOURCE_HASHES: dict[str, tuple[Callable[..., Any], str, str]] = {
    "_RedisConsumer.__next__": (
        _RedisConsumer.__next__,
        "bc405a9576218e8f",
        "tasks.broker._WakingConsumer.__next__ copies its fetch path",
    ),
    "_RedisConsumer.__init__": (
        _RedisConsumer.__init__,
        "586fdbf2d48ff544",
        "_WakingConsumer uses the attributes it sets (message_cache, misses, prefetch, ...)",
    ),
    "RedisBroker.consume": (
        RedisBroker.consume,
        "8d98448a247eb38d",
        "WakingRedisBroker.consumer_class must still be what consume() instantiates",
    ),
    "RedisBroker.consumer_class": (
        RedisBroker.consumer_class.fget,  # type: ignore[attr-defined]
        "d7a07a3ecfec6046",
        "WakingRedisBroker overrides this property",
    ),
    "RedisBroker.enqueue": (
        RedisBroker.enqueue,
        "48de91b5ef2e15a8",
        "WakingRedisBroker.enqueue wraps it (the wake-up token after each undelayed enqueue)",
    ),
    "StubBackend._store": (
        StubBackend._store,
        "cc7b0a1875210ba1",
        "tasks.broker.NotifyingStubBackend._store wakes waiters after it",
    ),
    "StubBackend._get": (
        StubBackend._get,
        "8cb6565e9960e0ed",
        "NotifyingStubBackend.get_stored reads results through it",
    ),
    "RedisBackend._store": (
        RedisBackend._store,
        "bcad7f191af204de",
        "tasks.queue awaits a result with BRPOPLPUSH on build_message_key's list, "
        "decoded with the backend's encoder",
    ),
    "AsyncIO.before_worker_boot": (
        AsyncIO.before_worker_boot,
        "9c084c6c57c1f0af",
        "tasks.actors.WorkerResources opens the worker's Deps on the loop thread it starts",
    ),
    "AsyncIO.after_worker_shutdown": (
        AsyncIO.after_worker_shutdown,
        "6ec5ffe4fdcd94f8",
        "WorkerResources closes the Deps on that loop before it stops",
    ),
    "get_event_loop_thread": (
        get_event_loop_thread,
        "262ee0a3458ff50c",
        "WorkerResources runs the Deps' open and close on the thread this returns",
    ),
}


def _digest(fn: Callable[..., Any]) -> str:
    return hashlib.sha256(textwrap.dedent(inspect.getsource(fn)).encode()).hexdigest()[:16]


def test_dramatiq_is_the_minor_version_we_tested() -> None:
    assert dramatiq.__version__.startswith("2.2."), (
        f"dramatiq {dramatiq.__version__}: pyproject pins >=2.2,<2.3; re-check everything this "
        "module lists before widening the pin"
    )


@pytest.mark.parametrize("name", sorted(SOURCE_HASHES))
def test_the_code_we_copied_or_override_is_unchanged(name: str) -> None:
    fn, recorded, why = SOURCE_HASHES[name]
    assert _digest(fn) == recorded, (
        f"dramatiq's {name} changed ({why}): compare it with tasks/broker.py, adapt ours, "
        "then record the new hash in tests/tasks/test_dramatiq_contract.py"
    )


def test_the_consumer_attributes_we_use_exist() -> None:
    consumer = _RedisConsumer(object(), "q", 3, 1000)  # type: ignore[arg-type]
    used = ["message_cache", "misses", "queued_message_ids", "prefetch", "timeout"]
    used += ["queue_name", "broker", "outstanding_message_count"]
    missing = [name for name in used if not hasattr(consumer, name)]
    assert missing == [], f"_RedisConsumer lost {missing}: tasks.broker._WakingConsumer uses them"
    assert issubclass(_WakingConsumer, _RedisConsumer)
    assert isinstance(StubBackend.results, dict), "NotifyingStubBackend replaces this class dict"


def test_the_broker_commands_we_call_exist() -> None:
    # RedisBroker.__getattr__ turns do_<command> into a call of its dispatch Lua script.
    from dramatiq.brokers import redis as redis_module

    script = redis_module._scripts["dispatch"].decode()
    for command in ("fetch", "requeue", "ack", "nack"):
        assert f'command == "{command}"' in script, (
            f"RedisBroker.do_{command} is gone: tasks.broker and tasks.shutdown call it"
        )


def test_the_redis_layout_we_read_is_unchanged(redis_url: str) -> None:
    """tasks.queue reads ``<namespace>:<queue>.msgs``; tasks.shutdown the ``redis_message_id``."""
    client = redis.Redis.from_url(redis_url)
    broker = WakingRedisBroker(client=client, namespace=QUEUE_NAMESPACE)
    try:
        actor = dramatiq.Actor(
            lambda: None,
            broker=broker,
            actor_name="contract_probe",
            queue_name="contract-probe",
            priority=0,
            options={},
        )
        message = actor.send()
        assert client.hlen(f"{QUEUE_NAMESPACE}:contract-probe.msgs") == 1
        consumer = broker.consume("contract-probe", prefetch=1, timeout=100)
        assert isinstance(consumer, _WakingConsumer)
        fetched = next(consumer)
        assert fetched is not None and fetched.message_id == message.message_id
        assert fetched.options.get("redis_message_id"), "tasks.shutdown requeues by this option"
        consumer.ack(fetched)
        consumer.close()
    finally:
        broker.close()
