"""Writes through Dramatiq: in-process and over Redis; retries never store twice."""

from __future__ import annotations

import asyncio
import time

import dramatiq
import psycopg
import pytest

from config.settings import Settings
from memory.commands import Command
from memory.deps import Deps
from memory.errors import MemoryServiceError
from storage.pool import make_pool
from tasks.actors import WorkerResources, declare_actors
from tasks.broker import make_broker
from tasks.queue import DramatiqWriteQueue
from tests.conftest import QUEUE_NAMESPACE
from tests.tool_calls import USE_CASES, meta_for, parse_command


def _count(dsn: str, user_id: int) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT count(*) FROM memories WHERE user_id = %s", (user_id,)
        ).fetchone()[0]


def _start(redis_url, dsn, settings, embedder, *, threads=2):
    async def build() -> Deps:
        pool = make_pool(dsn, min_size=1, max_size=4, name="test-worker")
        await pool.open(wait=True)
        return Deps(settings=settings, pool=pool, embedder=embedder)

    async def close(d: Deps) -> None:
        await d.pool.close()

    bundle = make_broker(
        redis_url, namespace=QUEUE_NAMESPACE, extra_middleware=[WorkerResources(build, close)]
    )
    actors = declare_actors(bundle.broker)
    worker = dramatiq.Worker(bundle.broker, worker_threads=threads, worker_timeout=100)
    worker.start()
    return bundle, actors, worker


@pytest.fixture(params=["in-process", "redis"])
async def queue(request, clean_db, settings, embedder):
    redis_url = request.getfixturevalue("redis_url") if request.param == "redis" else None
    bundle, actors, worker = _start(redis_url, clean_db, settings, embedder)
    q = DramatiqWriteQueue(bundle, actors, timeout_s=30)
    yield q
    await q.aclose()
    worker.stop()
    bundle.broker.close()


def _command(tool: str, args: dict) -> Command:
    return parse_command(tool, args, Settings())


async def test_write_runs_on_worker_and_retry_does_not_store_twice(queue, clean_db, alice):
    args = {"text": "My sister Ana lives in Porto.", "dedup_policy": "insert"}
    first = await queue.submit(meta_for(alice, "key-1"), _command("remember", args))
    assert first["ok"] and first["message"] == "Ok"
    again = await queue.submit(meta_for(alice, "key-1"), _command("remember", args))
    assert again == first
    assert _count(clean_db, alice) == 1


async def test_batch_retry_returns_the_same_ids(queue, clean_db, alice):
    items = [
        {"text": f"Fact number {i} about my garden.", "dedup_policy": "insert"} for i in range(20)
    ]
    first = await queue.submit(
        meta_for(alice, "batch-1"), _command("remember_batch", {"items": items})
    )
    again = await queue.submit(
        meta_for(alice, "batch-1"), _command("remember_batch", {"items": items})
    )
    assert first == again and first["summary"]["succeeded"] == 20
    assert _count(clean_db, alice) == 20


async def test_domain_errors_come_back_as_errors(queue, clean_db, alice):
    # The worker's error payload, passed on as it is (one conversion, on the worker).
    payload = await queue.submit(meta_for(alice, "k-404"), _command("forget", {"id": 12345}))
    assert payload["ok"] is False and payload["error"]["code"] == "NOT_FOUND"
    assert _count(clean_db, alice) == 0


async def test_a_parsed_command_runs_on_the_worker(queue, clean_db, alice, settings, deps):
    command = parse_command("remember", {"text": "My aunt Rosa lives in Lima."}, settings)
    first = await queue.submit(meta_for(alice, "cmd-1"), command)
    assert first["ok"] and first["message"] == "Ok"
    # A message an API process older than the commands queued carries raw arguments;
    # the worker's use case (what run_use_case calls) parses them: the same write.
    again = await USE_CASES["remember"](
        deps, alice, {"text": "My aunt Rosa lives in Lima."}, idempotency_key="cmd-1"
    )
    assert again == first
    assert _count(clean_db, alice) == 1


async def test_event_loop_keeps_serving_while_a_write_is_in_flight(queue, alice):
    items = [
        {"text": f"A long sentence number {i} about my week and what I did in it."}
        for i in range(100)
    ]
    lags = []

    async def ticker():
        while True:
            start = time.perf_counter()
            await asyncio.sleep(0.005)
            lags.append(time.perf_counter() - start - 0.005)

    task = asyncio.create_task(ticker())
    started = time.perf_counter()
    try:
        await queue.submit(
            meta_for(alice, "batch-lag"), _command("remember_batch", {"items": items})
        )
    finally:
        task.cancel()
    took = time.perf_counter() - started
    # Were the write run on the loop, one tick would wait for all of it. A busy
    # machine (CI shares two cores) can starve any tick for a few hundred ms, so
    # the bound is relative to the write's own time, never under a quarter second.
    assert len(lags) > 5
    bound = max(0.25, took / 2)
    assert max(lags) < bound, f"event loop was blocked for {max(lags):.3f}s of {took:.3f}s"


async def test_unreachable_redis_reports_nothing_stored(clean_db, settings, embedder, alice):
    bundle = make_broker("redis://127.0.0.1:1/0")
    actors = declare_actors(bundle.broker)
    q = DramatiqWriteQueue(bundle, actors, timeout_s=5)
    with pytest.raises(MemoryServiceError) as info:
        await q.submit(meta_for(alice, "k-down"), _command("remember", {"text": "I like tea."}))
    assert info.value.code == "DATABASE_ERROR"
    assert "nothing was stored" in info.value.message
    assert _count(clean_db, alice) == 0
