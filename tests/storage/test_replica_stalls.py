"""Read replicas when something stalls instead of failing (issue 33).

A real primary and streaming standby (``pair``); Redis and the replica are
reached through :class:`~tests.faults.stall_proxy.StallProxy` where a test
freezes them: the connections stay open and nothing answers, as when a
machine pauses or a network drops every packet.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from bootstrap.read_routing import build_replicas, routed_runner
from bootstrap.recording_queue import RecordingWriteQueue
from memory.calls import CallMeta
from memory.deps import Deps
from memory.errors import DATABASE_ERROR, MemoryServiceError
from memory.handlers import database_error
from storage.pool import connection_defaults, make_pool
from storage.replicas import LocalPositions, ReplicaSet
from tests.conftest import QUEUE_NAMESPACE
from tests.faults.stall_proxy import StallProxy
from tests.ops.lifecycle_helpers import base_env
from tests.tool_calls import InlineWriteQueue, meta_for, parse_command

from .conftest import caught_up
from .pg_pair import Server, cut_replication, free_port, make_primary, make_standby, wait_until

Pair = tuple[Server, Server]

#: What a read may take at most while a dependency is silent (issue 33's target).
READ_DEADLINE_S = 5.0


def _pool(url: str, name: str, size: int = 4) -> AsyncConnectionPool:
    return make_pool(connection_defaults(url, writable=False), min_size=1, max_size=size, name=name)


@pytest.fixture
async def primary_pool(pair: Pair) -> AsyncIterator[AsyncConnectionPool]:
    pool = _pool(pair[0].url(), "primary")
    await pool.open(wait=True)
    yield pool
    await pool.close()


@pytest.fixture
def redis_proxy(redis_url: str) -> Iterator[StallProxy]:
    with StallProxy(urlsplit(redis_url).port or 6379) as proxy:
        yield proxy


@pytest.fixture
def replica_proxy(pair: Pair) -> Iterator[StallProxy]:
    with StallProxy(pair[1].port) as proxy:
        yield proxy
    pair[1].sql("SELECT pg_wal_replay_resume()", database="postgres")


def _user(primary: Server, name: str) -> int:
    return int(
        str(
            primary.sql(
                f"INSERT INTO users (username, password_hash) VALUES ('{name}', 'x') "
                "ON CONFLICT (username) DO UPDATE SET username = EXCLUDED.username RETURNING id"
            )
        )
    )


async def test_reads_and_writes_while_redis_is_frozen_pay_its_deadline_once(
    pair: Pair,
    primary_pool: AsyncConnectionPool,
    redis_proxy: StallProxy,
    redis_url: str,
    settings: Any,
    embedder: Any,
) -> None:
    """Finding 2: the positions client tried a silent Redis several times per call, and
    every read and write paid it again; now one call pays POSITIONS_TIMEOUT_S, then Redis
    is skipped for a while and reads go to the primary, which has every write."""
    primary, standby = pair
    path = urlsplit(redis_url).path
    configured = settings.with_overrides(
        redis_url=f"redis://{redis_proxy.address}{path}",
        database_replica_urls=(standby.url(),),
        queue_namespace=QUEUE_NAMESPACE,
    )
    replicas = build_replicas(configured, primary_pool)
    assert replicas is not None
    await replicas.open()
    try:
        dave = _user(primary, "dave-redis-frozen")
        deps = Deps(settings=settings, pool=primary_pool, embedder=embedder)
        queue = RecordingWriteQueue(InlineWriteQueue(deps), replicas)
        await replicas.positions.get(dave)  # the client's connection is open
        redis_proxy.set_mode("freeze")
        started = time.monotonic()
        assert await replicas.pool_for_read(dave) is replicas.primary
        first = time.monotonic() - started
        assert first < 1.0, f"the first read waited {first:.1f} s on a frozen Redis"
        started = time.monotonic()
        for _ in range(20):
            assert await replicas.pool_for_read(dave) is replicas.primary
        remember = parse_command("remember", {"text": "Dave keeps bees."}, settings)
        stored = await queue.submit(meta_for(dave, "bees-1"), remember)
        assert stored["ok"]
        rest = time.monotonic() - started
        assert rest < 0.5, f"20 reads and a write waited {rest:.1f} s in all"
        # Redis answers again: the write's position, kept meanwhile, reaches it.
        redis_proxy.set_mode("pass")

        async def recorded() -> bool:
            try:
                return (await replicas.positions.get(dave) or 0) > 0
            except Exception:
                return False

        await _until("the write's position to reach Redis", recorded, 15)
    finally:
        await replicas.close()


async def test_a_read_on_a_frozen_replica_is_answered_by_the_primary(
    pair: Pair, primary_pool: AsyncConnectionPool, replica_proxy: StallProxy
) -> None:
    """A replica that freezes mid-read answers nothing and closes nothing; the read gives
    up when the health loop marks the replica down, and the primary answers it."""
    primary, standby = pair
    proxied = f"postgresql://postgres@{replica_proxy.address}/ownsona"
    replicas = ReplicaSet(
        primary_pool, [(proxied, _pool(proxied, "frozen"))], LocalPositions(), max_lag_s=5
    )
    await replicas.open()
    served: list[str] = []

    async def run(deps: Deps, meta: CallMeta, command: Any) -> dict[str, Any]:
        async with deps.pool.connection() as conn:
            cur = await conn.execute("SELECT pg_is_in_recovery()")
            row = await cur.fetchone()
        served.append("replica" if row and row[0] else "primary")
        return {"ok": True}

    try:
        wait_until("the standby to catch up", lambda: caught_up(primary, standby))
        await replicas.measure()
        assert [s.state for s in replicas.status()] == ["ok"]
        routed = routed_runner(run, replicas)
        deps = Deps(settings=None, pool=primary_pool, embedder=None)  # type: ignore[arg-type]
        count = parse_command("count_memories", {}, _settings())
        await routed(deps, CallMeta(10**9), count)
        assert served == ["replica"]
        replica_proxy.set_mode("freeze")
        started = time.monotonic()
        await asyncio.wait_for(routed(deps, CallMeta(10**9), count), READ_DEADLINE_S + 5)
        took = time.monotonic() - started
        assert served[-1] == "primary"
        assert took < READ_DEADLINE_S, f"the read waited {took:.1f} s"
        assert [s.state for s in replicas.status()] == ["down"]
    finally:
        replica_proxy.set_mode("pass")
        await replicas.close()


async def test_a_statement_timeout_on_a_replica_does_not_mark_it_down(
    pair: Pair, primary_pool: AsyncConnectionPool
) -> None:
    """Finding 7: a query that times out by itself fails on the primary too; it is
    answered as it is, and the replica keeps serving everyone else."""
    _, standby = pair
    replicas = ReplicaSet(
        primary_pool,
        [(standby.url(), _pool(standby.url(), "replica"))],
        LocalPositions(),
        max_lag_s=5,
    )
    await replicas.open()
    ran: list[bool] = []

    async def slow(deps: Deps, meta: CallMeta, command: Any) -> dict[str, Any]:
        ran.append(deps.pool is primary_pool)
        try:
            async with deps.pool.connection() as conn, conn.transaction():
                await conn.execute("SET LOCAL statement_timeout = '50ms'")
                await conn.execute("SELECT pg_sleep(2)")
        except psycopg.Error as ex:
            raise database_error(ex, "slow") from ex
        return {"ok": True}

    try:
        await replicas.measure()
        assert [s.state for s in replicas.status()] == ["ok"]
        deps = Deps(settings=None, pool=primary_pool, embedder=None)  # type: ignore[arg-type]
        count = parse_command("count_memories", {}, _settings())
        with pytest.raises(MemoryServiceError) as caught:
            await routed_runner(slow, replicas)(deps, CallMeta(10**9), count)
        assert caught.value.code == DATABASE_ERROR
        assert ran == [False], "the query's own timeout ran it again on the primary"
        assert [s.state for s in replicas.status()] == ["ok"]
    finally:
        await replicas.close()


async def test_lag_is_measured_while_the_serving_pool_is_exhausted(pair: Pair) -> None:
    """Finding 8: the primary's position was sampled through the serving pool; with every
    connection busy the samples went stale and a lagging replica read as 0 s behind."""
    primary, standby = pair
    busy = _pool(primary.url(), "busy", size=1)
    await busy.open(wait=True)
    replicas = ReplicaSet(
        busy,
        [(standby.url(), _pool(standby.url(), "replica"))],
        LocalPositions(),
        max_lag_s=0.5,
    )
    await replicas.open()
    try:
        await replicas.measure()
        standby.sql("SELECT pg_wal_replay_pause()", database="postgres")
        async with busy.connection():  # every serving connection is busy
            _user(primary, "erin-lag")

            async def lagging() -> bool:
                await replicas.measure()
                return replicas.status()[0].state == "lagging"

            await _until("the paused replica to count as lagging", lagging, 20)
    finally:
        standby.sql("SELECT pg_wal_replay_resume()", database="postgres")
        await replicas.close()
        await busy.close()


async def test_a_failed_recording_pins_the_user_to_the_primary_for_a_bounded_time(
    redis_url: str,
) -> None:
    """Finding 6: the pin was a huge position that every later write renewed, so a user
    who kept writing read from the primary for ever; a pin now ends on its own."""
    import redis.asyncio as aredis

    from bootstrap.read_routing import PRIMARY_ONLY, RedisPositions

    for positions in (
        LocalPositions(),
        RedisPositions(aredis.Redis.from_url(redis_url), QUEUE_NAMESPACE),
    ):
        await positions.pin(41, ttl_s=0.3)
        assert await positions.get(41) == PRIMARY_ONLY
        started = time.monotonic()
        while time.monotonic() - started < 0.6:  # the user keeps writing
            await positions.put(41, 1_000, ttl_s=60)
            await asyncio.sleep(0.05)
        assert await positions.get(41) == 1_000
        closer = getattr(positions, "aclose", None)
        if closer is not None:
            await closer()


async def test_a_replica_on_the_old_timeline_never_serves() -> None:
    """Finding 5: after a failover, a standby still following the old primary replays a
    history the new primary does not have; its replay position can read far ahead. It
    must serve nothing, however far its position reads."""
    root = Path(tempfile.mkdtemp(prefix="ownsona-timelines-"))
    root.chmod(0o755)  # the servers run as the wheel's user (as root)
    servers: list[Server] = []
    try:
        old = make_primary(root)
        servers.append(old)
        old.sql("CREATE EXTENSION IF NOT EXISTS vector")  # the pools register its type
        promoted = make_standby(old, root, "promoted")
        servers.append(promoted)
        follower = make_standby(old, root, "follower")
        servers.append(follower)
        wait_until("both standbys to catch up", lambda: caught_up(old, promoted)
                   and caught_up(old, follower))  # fmt: skip
        cut_replication(promoted)
        promoted.promote()
        wait_until("the promotion", lambda: promoted.sql("SELECT NOT pg_is_in_recovery()"))
        # The old primary lives on and writes a history the promoted one never sees.
        old.sql("CREATE TABLE diverged AS SELECT g FROM generate_series(1, 20000) g")
        wait_until("the follower to replay it", lambda: caught_up(old, follower))
        new_primary = _pool(promoted.url(), "new-primary")
        await new_primary.open(wait=True)
        replicas = ReplicaSet(
            new_primary,
            [(follower.url(), _pool(follower.url(), "follower"))],
            LocalPositions(),
            max_lag_s=60,
        )
        try:
            await replicas.open()
            await replicas.measure()
            assert [s.state for s in replicas.status()] == ["down"]
            assert await replicas.pool_for_read(10**9) is new_primary
        finally:
            await replicas.close()
            await new_primary.close()
    finally:
        for server in servers:
            with contextlib.suppress(Exception):
                server.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_replicas_with_several_web_processes_and_no_redis_are_refused(
    pair: Pair, tmp_path: Path
) -> None:
    """Finding 4: without Redis each web process knows only its own users' write
    positions, so another process could serve a user's read from a lagging replica."""
    primary, standby = pair
    env = base_env()
    env.update(
        OWNSONA_DATA_DIR=str(tmp_path / "data"),
        PORT=str(free_port()),
        DATABASE_URL=primary.url(),
        DATABASE_REPLICA_URLS=standby.url(),
        WEB_CONCURRENCY="2",
    )
    env = {k: v for k, v in env.items() if not k.startswith("REDIS_")}
    done = subprocess.run(
        [sys.executable, "-m", "scripts.cli", "serve"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert "DATABASE_REPLICA_URLS" in done.stderr and "REDIS_URL" in done.stderr, done.stderr


def _settings() -> Any:
    from config.settings import Settings

    return Settings(public_url="http://127.0.0.1:8000")


async def _until(what: str, ready: Any, deadline_s: float) -> None:
    started = time.monotonic()
    while not await ready():
        assert time.monotonic() - started < deadline_s, f"{what}: not within {deadline_s} s"
        await asyncio.sleep(0.05)
