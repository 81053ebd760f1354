"""A worker killed in the middle of a batch: after redelivery every item is stored once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import redis

from config.settings import Settings
from tasks.actors import declare_actors
from tasks.broker import make_broker
from tasks.queue import DramatiqWriteQueue
from tests.conftest import QUEUE_NAMESPACE
from tests.opened_rows import memory_texts
from tests.tool_calls import meta_for, parse_command

HEARTBEAT_MS = 2000
_FILLER = (
    "peppers and beans along the south fence, waters them every evening at seven, "
    "and gives the surplus to the school kitchen on Fridays before the market opens."
)


def _start_worker(dsn: str, redis_url: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "DATABASE_URL": dsn,
        "REDIS_URL": redis_url,
        "QUEUE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_MS),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "scripts.cli", "worker", "--threads", "2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "worker running" in line:
            return proc
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError("worker did not start")


async def _wait_until_taken(redis_url: str) -> None:
    """Until a worker holds the message in its in-flight (unacked) set."""
    client = redis.Redis.from_url(redis_url)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for key in client.scan_iter(match=f"{QUEUE_NAMESPACE}:__acks__*"):
            if client.scard(key) > 0:
                return
        await asyncio.sleep(0.002)
    raise AssertionError("no worker took the message")


def _rows(dsn: str, user_id: int) -> list[tuple[int, str]]:
    return memory_texts(dsn, "m.user_id = %s", (user_id,))


async def test_killed_worker_redelivers_and_stores_each_item_once(clean_db, redis_url, alice):
    bundle = make_broker(redis_url, namespace=QUEUE_NAMESPACE, heartbeat_timeout_ms=HEARTBEAT_MS)
    queue = DramatiqWriteQueue(bundle, declare_actors(bundle.broker), timeout_s=90)
    items = [
        {
            # Long texts keep the worker busy embedding for a while.
            "text": f"Durability fact {i}: my neighbour number {i} grows tomatoes, " + _FILLER,
            "dedup_policy": "insert",
        }
        for i in range(200)
    ]
    first = _start_worker(clean_db, redis_url)
    second = None
    try:
        call = asyncio.create_task(
            queue.submit(
                meta_for(alice, "durable-1"),
                parse_command("remember_batch", {"items": items}, Settings()),
            )
        )
        await _wait_until_taken(redis_url)  # the first worker has the message and is embedding
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        assert not call.done()
        assert _rows(clean_db, alice) == []  # nothing half-written
        second = _start_worker(clean_db, redis_url)
        payload = await asyncio.wait_for(call, 80)
    finally:
        for proc in (first, second):
            if proc is not None:
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait(30)
                assert proc.stdout is not None
                proc.stdout.close()
        await queue.aclose()
        bundle.broker.close()
    assert payload["summary"] == {"total": 200, "succeeded": 200, "failed": 0}
    rows = _rows(clean_db, alice)
    assert len(rows) == 200
    assert sorted(text for _, text in rows) == sorted(item["text"] for item in items)
    assert sorted(r["memory_id"] for r in payload["results"]) == [row_id for row_id, _ in rows]
