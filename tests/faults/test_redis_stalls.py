"""The write queue and /readyz when Redis or a Sentinel stalls instead of refusing (issue 33).

Redis is reached through :class:`~tests.faults.stall_proxy.StallProxy`: frozen,
its connections stay open and nothing answers, as when its machine pauses.
What a caller must get is a bounded wait and an answer that tells the truth.
"""

from __future__ import annotations

import asyncio
import gc
import shutil
import time
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis

from config.redis_sentinel import RedisSentinel
from config.settings import Settings
from memory.errors import DATABASE_ERROR, MemoryServiceError
from scripts.redis_topology import MASTER_NAME, RedisTopology
from tasks.actors import declare_actors
from tasks.broker import make_broker
from tasks.queue import DramatiqWriteQueue
from tasks.redis_clients import RedisTarget
from tests.conftest import QUEUE_NAMESPACE, delete_namespace
from tests.tool_calls import meta_for, parse_command

from .stall_proxy import StallProxy

needs_redis_server = pytest.mark.skipif(
    shutil.which("redis-server") is None, reason="needs Debian's redis-server"
)


def _remember(text: str) -> Any:
    return parse_command("remember", {"text": text, "dedup_policy": "insert"}, Settings())


@pytest.fixture(autouse=True)
def collect_cut_connections() -> Iterator[None]:
    """After each test, collect the client connections its stall cut off.

    A Redis client whose connection timed out against a frozen or silent server can
    leave that socket to the garbage collector, which closes it with a ResourceWarning
    in whichever later test it happens to run (a full run failed so, in a test that
    had nothing to do with it). Collected here, silently, it is closed where it was cut.
    """
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


@pytest.fixture
def redis_proxy(redis_url: str) -> Iterator[StallProxy]:
    with StallProxy(urlsplit(redis_url).port or 6379) as proxy:
        yield proxy


@pytest.fixture
async def proxied_queue(
    redis_url: str, redis_proxy: StallProxy
) -> AsyncIterator[DramatiqWriteQueue]:
    """The real write queue on Redis through the proxy, with no worker (nothing consumes)."""
    url = f"redis://{redis_proxy.address}{urlsplit(redis_url).path}"
    bundle = make_broker(url, namespace=f"{QUEUE_NAMESPACE}-stall")
    queue = DramatiqWriteQueue(bundle, declare_actors(bundle.broker), timeout_s=3)
    yield queue
    redis_proxy.set_mode("pass")
    await queue.aclose()
    bundle.broker.close()


def _queued(redis_url: str) -> int:
    with redis.Redis.from_url(redis_url) as client:
        return sum(
            int(client.hlen(key))
            for key in client.scan_iter(match=f"{QUEUE_NAMESPACE}-stall:*.msgs")
        )


async def test_a_write_sent_to_a_frozen_redis_is_never_answered_nothing_was_stored(
    proxied_queue: DramatiqWriteQueue, redis_proxy: StallProxy, redis_url: str, alice: int
) -> None:
    """The send stalls after the message left; the thawed Redis delivers it. The answer
    must say the write may be stored (and how to find out), within a bounded wait."""
    try:
        # A first write opens the broker's connection (it times out: no worker runs).
        with pytest.raises(MemoryServiceError):
            await proxied_queue.submit(meta_for(alice, "warm"), _remember("Warm-up."))
        before = _queued(redis_url)
        redis_proxy.set_mode("freeze")
        started = time.monotonic()
        with pytest.raises(MemoryServiceError) as caught:
            await asyncio.wait_for(
                proxied_queue.submit(meta_for(alice, "frozen-1"), _remember("Frozen send.")),
                20,
            )
        took = time.monotonic() - started
        assert caught.value.code == DATABASE_ERROR
        assert "nothing was stored" not in caught.value.message
        assert "may or may not be stored" in caught.value.message
        assert took < 6, f"the send waited {took:.1f} s"
        redis_proxy.set_mode("pass")
        deadline = time.monotonic() + 5
        while _queued(redis_url) <= before:  # the thaw delivers what was sent
            assert time.monotonic() < deadline, "the thawed Redis never got the message"
            await asyncio.sleep(0.05)
    finally:
        redis_proxy.set_mode("pass")


async def test_a_result_wait_on_a_frozen_redis_ends_at_the_write_timeout(
    proxied_queue: DramatiqWriteQueue, redis_proxy: StallProxy, alice: int
) -> None:
    """Queued, then Redis freezes while the caller waits for the result: the answer comes
    at the write's own deadline (3 s here) and says it may still be applied."""
    try:
        submitted = asyncio.create_task(
            proxied_queue.submit(meta_for(alice, "wait-1"), _remember("Waiting."))
        )
        await asyncio.sleep(0.5)  # queued, now waiting on BRPOPLPUSH
        redis_proxy.set_mode("freeze")
        started = time.monotonic()
        with pytest.raises(MemoryServiceError) as caught:
            await asyncio.wait_for(submitted, 30)
        took = time.monotonic() - started
        assert "may still be applied" in caught.value.message
        assert took < 5, f"the caller waited {took:.1f} s past a 3 s write timeout"
    finally:
        redis_proxy.set_mode("pass")


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisTopology]:
    if shutil.which("redis-server") is None:
        pytest.skip("needs Debian's redis-server")
    topo = RedisTopology(tmp_path_factory.mktemp("redis-stalls")).start()
    try:
        yield topo
    finally:
        topo.stop()


@needs_redis_server
async def test_readyz_is_ready_within_a_second_with_the_first_sentinel_silent(
    topology: RedisTopology, tmp_path: Path
) -> None:
    """Finding 3: every probe built a new Sentinel client and asked the Sentinels in turn,
    2 s each: a silent first one made every probe time out, and the balancer dropped
    every web process."""
    from api.health import REDIS_TIMEOUT_S

    with StallProxy(topology.sentinels[0].port) as silent:
        silent.set_mode("blackhole")
        sentinels = (
            ("127.0.0.1", silent.port),
            *(("127.0.0.1", node.port) for node in topology.sentinels[1:]),
        )
        target = RedisTarget(sentinel=RedisSentinel(sentinels=sentinels, master=MASTER_NAME))
        bundle = make_broker(target, namespace=f"{QUEUE_NAMESPACE}-probe")
        queue = DramatiqWriteQueue(bundle, declare_actors(bundle.broker), timeout_s=5)
        try:
            for _ in range(3):  # every probe, not only the first
                started = time.monotonic()
                await asyncio.wait_for(queue.check_ready(), 5)
                took = time.monotonic() - started
                assert took < 1.0, f"the probe took {took:.2f} s"
            assert REDIS_TIMEOUT_S <= 1.0  # what /readyz allows it
        finally:
            await queue.aclose()
            bundle.broker.close()


async def test_a_dead_lettered_write_is_named_as_such_not_as_a_failover(
    redis_url: str, alice: int
) -> None:
    """A worker that cannot run a message (an actor of another release) dead-letters it;
    the waiting caller was told the queue lost it "because its Redis server failed over".
    Played here as dramatiq's nack does it, in a namespace no worker consumes."""
    from tasks.results import RedisResults

    namespace = f"{QUEUE_NAMESPACE}-dead"
    bundle = make_broker(redis_url, namespace=namespace)
    waiter = RedisResults(bundle, RedisTarget(url=redis_url), slice_s=0.2)
    message = declare_actors(bundle.broker).run_command.message(
        meta_for(alice, "dead-1").to_json(), _remember("A write no worker can run.").to_json()
    )
    queue = f"{namespace}:{message.queue_name}"
    client = bundle.broker.client
    try:
        wait = asyncio.create_task(waiter.send_and_wait(message, timeout_s=30))
        started = time.monotonic()
        while not client.hlen(f"{queue}.msgs"):
            assert time.monotonic() - started < 10, "the message was never enqueued"
            await asyncio.sleep(0.01)
        (message_id,) = client.hkeys(f"{queue}.msgs")
        with client.pipeline() as pipe:  # dispatch.lua's "nack"
            pipe.zadd(f"{queue}.XQ", {message_id: 1})
            pipe.hset(f"{queue}.XQ.msgs", message_id, client.hget(f"{queue}.msgs", message_id))
            pipe.hdel(f"{queue}.msgs", message_id)
            pipe.lrem(queue, 0, message_id)
            pipe.execute()
        with pytest.raises(MemoryServiceError) as caught:
            await asyncio.wait_for(wait, 10)
        assert "dead-letter" in caught.value.message
        assert "failed over" not in caught.value.message
    finally:
        await waiter.aclose()
        delete_namespace(client, namespace)
        bundle.broker.close()


def test_clearing_a_sessions_keys_spares_the_session_whose_pid_extends_its_own(
    redis_server_url: str,
) -> None:
    """The dead-letter test above failed once in a tests/faults run: its message vanished
    while the caller waited. Sessions sharing one Redis each clear their namespace, and
    ``<namespace>*`` also matched the namespace of another session whose pid extends
    this one's (pid 1624 cleared pid 16244's keys mid-test)."""
    client = redis.Redis.from_url(redis_server_url)
    other = f"{QUEUE_NAMESPACE}7"  # the namespace of the session with pid <ours>7
    theirs = [f"{other}:default.msgs", f"{other}-results:x", f"{other}-dead:default.XQ.msgs"]
    ours = [f"{QUEUE_NAMESPACE}:default.msgs", f"{QUEUE_NAMESPACE}-dead:default.XQ.msgs"]
    try:
        for key in theirs + ours:
            client.set(key, "1")
        delete_namespace(client, QUEUE_NAMESPACE)
        assert client.exists(*theirs) == len(theirs), "another session's keys were deleted"
        assert client.exists(*ours) == 0, "this session's keys were left"
    finally:
        client.delete(*theirs, *ours)
        client.close()
