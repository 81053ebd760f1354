"""Read replicas (issue 29): routing, read-your-writes, lag, and the start-up refusals.

One primary and one real streaming standby for the module (``pair``). Lag is
made deterministic by pausing the standby's replay (``pg_wal_replay_pause()``).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from psycopg_pool import AsyncConnectionPool

from api.health import replica_states
from bootstrap.read_routing import routed_runner
from bootstrap.recording_queue import RecordingWriteQueue
from memory.calls import CallMeta
from memory.deps import Deps
from memory.handlers import dispatch
from storage.pool import connection_defaults, make_pool
from storage.replicas import LocalPositions, ReplicaRefused, ReplicaSet
from tests.ops.lifecycle_helpers import base_env
from tests.tool_calls import InlineWriteQueue, meta_for, parse_command

from .conftest import caught_up
from .pg_pair import Server, free_port, wait_until

Pair = tuple[Server, Server]


def _pool(url: str, name: str) -> AsyncConnectionPool:
    return make_pool(connection_defaults(url, writable=False), min_size=1, max_size=4, name=name)


@pytest.fixture
async def replicas(pair: Pair) -> AsyncIterator[ReplicaSet]:
    primary, standby = pair
    primary_pool = _pool(primary.url(), "primary")
    await primary_pool.open(wait=True)
    rs = ReplicaSet(
        primary_pool, [(standby.url(), _pool(standby.url(), "replica"))], LocalPositions(),
        max_lag_s=0.5,
    )  # fmt: skip
    assert await rs.check(primary.url()) == []
    await rs.open()
    yield rs
    await rs.close()
    await primary_pool.close()
    standby.sql("SELECT pg_wal_replay_resume()", database="postgres")


async def _in_recovery(pool: AsyncConnectionPool) -> bool:
    async with pool.connection() as conn:
        row = await (await conn.execute("SELECT pg_is_in_recovery()")).fetchone()
    assert row is not None
    return bool(row[0])


async def _user(pool: AsyncConnectionPool, name: str) -> int:
    async with pool.connection() as conn:
        row = await (
            await conn.execute(
                "INSERT INTO users (username, password_hash) VALUES (%s, 'x') RETURNING id", (name,)
            )
        ).fetchone()
    assert row is not None
    return int(row[0])


async def _sees_user(pool: AsyncConnectionPool, user_id: int) -> bool:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT 1 FROM users WHERE id = %s", (user_id,))
        return await cur.fetchone() is not None


async def _until(what: str, ready, deadline_s: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    while not await ready():
        assert time.monotonic() - started < deadline_s, f"{what}: not within {deadline_s} s"
        await asyncio.sleep(0.05)


async def test_reads_go_to_a_healthy_replica(replicas: ReplicaSet, pair: Pair) -> None:
    assert [s.state for s in replicas.status()] == ["ok"]
    chosen = await replicas.pool_for_read(user_id=1)
    assert chosen is not replicas.primary
    assert await _in_recovery(chosen)
    assert replicas.status()[0].reads == 1


async def test_a_user_reads_their_write_while_the_replica_lags(
    replicas: ReplicaSet, pair: Pair
) -> None:
    primary, standby = pair
    standby.sql("SELECT pg_wal_replay_pause()", database="postgres")
    alice = await _user(replicas.primary, "alice-ryw")
    await replicas.wrote(alice)
    other = 10**9  # a user who wrote nothing
    await replicas.measure()
    # Alice's read goes where her write is; the replica has not replayed it.
    chosen = await replicas.pool_for_read(alice)
    assert chosen is replicas.primary and await _sees_user(chosen, alice)
    assert standby.sql(f"SELECT count(*) FROM users WHERE id = {alice}") == 0
    # Someone else still reads from the replica while it is within REPLICA_MAX_LAG_S
    # (a set of its own with a lag bound the paused replay cannot pass during the test:
    # the fixture's 0.5 s may have passed already, and the check must not be skipped).
    patient = ReplicaSet(
        replicas.primary, [(standby.url(), _pool(standby.url(), "patient"))], LocalPositions(),
        max_lag_s=60,
    )  # fmt: skip
    await patient.open()
    try:
        await patient.positions.put(alice, 2**40, patient.position_ttl_s)  # far ahead
        assert [s.state for s in patient.status()] == ["ok"]
        assert await patient.pool_for_read(other) is not replicas.primary
        assert await patient.pool_for_read(alice) is replicas.primary
    finally:
        await patient.close()
    standby.sql("SELECT pg_wal_replay_resume()", database="postgres")
    wait_until("the standby to catch up", lambda: caught_up(primary, standby))

    async def replica_serves_alice() -> bool:
        await replicas.measure()
        return await replicas.pool_for_read(alice) is not replicas.primary

    await _until("alice's reads to return to the replica", replica_serves_alice)
    assert await _sees_user(await replicas.pool_for_read(alice), alice)


async def test_reads_go_to_the_primary_while_write_positions_cannot_be_read(
    pair: Pair, caplog: pytest.LogCaptureFixture
) -> None:
    # The positions live in Redis; with Redis gone (its master dead, a Sentinel failover
    # under way) a read must still be answered, from the one node sure to hold the
    # user's writes, not fail.
    import redis.asyncio as aredis

    from bootstrap.read_routing import RedisPositions

    primary, standby = pair
    primary_pool = _pool(primary.url(), "primary")
    await primary_pool.open(wait=True)
    gone = RedisPositions(
        aredis.Redis(port=free_port(), socket_connect_timeout=1, socket_timeout=1), "ryw-test"
    )
    rs = ReplicaSet(
        primary_pool, [(standby.url(), _pool(standby.url(), "replica"))], gone, max_lag_s=5
    )
    await rs.open()
    try:
        await rs.measure()
        assert [s.state for s in rs.status()] == ["ok"]
        assert await rs.pool_for_read(user_id=1) is rs.primary
        assert "could not read a user's last write position (ConnectionError)" in caplog.text
    finally:
        await rs.close()
        await primary_pool.close()


async def test_a_lagging_replica_is_skipped_and_comes_back(
    replicas: ReplicaSet, pair: Pair
) -> None:
    primary, standby = pair
    standby.sql("SELECT pg_wal_replay_pause()", database="postgres")
    await _user(replicas.primary, "bob-lag")

    async def lagging() -> bool:
        await replicas.measure()
        return replicas.status()[0].state == "lagging"

    await _until("the paused replica to count as lagging", lagging)
    status = replicas.status()[0]
    assert status.lag_s is not None and status.lag_s > 0.5
    assert await replicas.pool_for_read(10**9) is replicas.primary
    standby.sql("SELECT pg_wal_replay_resume()", database="postgres")

    async def healthy() -> bool:
        await replicas.measure()
        return replicas.status()[0].state == "ok"

    await _until("the replica to come back by itself", healthy)
    assert await replicas.pool_for_read(10**9) is not replicas.primary


async def test_an_unreachable_replica_is_warned_and_skipped(pair: Pair) -> None:
    primary, _ = pair
    primary_pool = _pool(primary.url(), "primary")
    await primary_pool.open(wait=True)
    gone = f"postgresql://postgres@127.0.0.1:{free_port()}/ownsona"
    rs = ReplicaSet(primary_pool, [(gone, _pool(gone, "gone"))], LocalPositions(), max_lag_s=5)
    try:
        warnings = await rs.check(primary.url())
        assert len(warnings) == 1 and "is unreachable" in warnings[0]
        await rs.open()
        assert rs.status()[0].state == "down"
        assert await rs.pool_for_read(1) is primary_pool
    finally:
        await rs.close()
        await primary_pool.close()


async def test_a_replica_url_that_is_a_primary_is_refused(pair: Pair) -> None:
    primary, _ = pair
    rs = ReplicaSet(
        _pool(primary.url(), "p"), [(primary.url(), _pool(primary.url(), "r"))], LocalPositions(),
        max_lag_s=5,
    )  # fmt: skip
    with pytest.raises(ReplicaRefused, match=r"is a primary \(pg_is_in_recovery\(\) is false\)"):
        await rs.check(primary.url())


async def test_a_replica_of_another_database_is_refused(pair: Pair, dsn: str) -> None:
    # The test session's embedded cluster: another initdb, so another system identifier.
    primary, _ = pair
    rs = ReplicaSet(
        _pool(primary.url(), "p"), [(dsn, _pool(dsn, "r"))], LocalPositions(), max_lag_s=5
    )
    with pytest.raises(ReplicaRefused, match="is another database"):
        await rs.check(primary.url())


async def test_tools_read_their_own_write_through_the_routed_runner(
    replicas: ReplicaSet, pair: Pair, embedder: Any, settings: Any
) -> None:
    primary, standby = pair
    deps = Deps(settings=settings, pool=replicas.primary, embedder=embedder)
    run = routed_runner(dispatch, replicas)
    queue = RecordingWriteQueue(InlineWriteQueue(deps), replicas)
    carol = await _user(replicas.primary, "carol-tools")
    standby.sql("SELECT pg_wal_replay_pause()", database="postgres")
    remember = parse_command("remember", {"text": "Carol's cat is called Miso."}, settings)
    stored = await queue.submit(meta_for(carol, "key-1"), remember)
    # At once, whichever process: the write's position is recorded, the replica has not
    # replayed it, so the read is served by the primary and sees the write.
    get = parse_command("get_memory", {"id": stored["memory_id"]}, settings)
    got = await run(deps, CallMeta(carol), get)
    assert got["memory"]["text"] == "Carol's cat is called Miso."
    assert replicas.primary_reads >= 1
    # Another user's read is served by the replica (it is within REPLICA_MAX_LAG_S).
    before = replicas.status()[0].reads
    counted = await run(deps, CallMeta(10**9), parse_command("count_memories", {}, settings))
    assert counted["count"] == 0 and replicas.status()[0].reads == before + 1
    standby.sql("SELECT pg_wal_replay_resume()", database="postgres")


def test_readyz_shows_each_replica(replicas: ReplicaSet) -> None:
    states = replica_states(replicas)
    assert states == [
        {"name": states[0]["name"], "state": "ok", "lag_s": states[0]["lag_s"], "ok": True}
    ]
    assert states[0]["name"].startswith("127.0.0.1:") and states[0]["name"].endswith("/ownsona")


# -- ownsona serve with replicas ----------------------------------------------------


def _serve_env(tmp_path: Path, **values: str) -> dict[str, str]:
    env = base_env()
    env.update(OWNSONA_DATA_DIR=str(tmp_path / "data"), PORT=str(free_port()), **values)
    return env


def test_serve_refuses_a_replica_url_that_is_a_primary(pair: Pair, tmp_path: Path) -> None:
    primary, _ = pair
    # The servers trust local connections: the password is never checked, only never shown.
    replica = primary.url().replace("postgres@", "postgres:hunter2-never-shown@")
    done = subprocess.run(
        [sys.executable, "-m", "scripts.cli", "serve"],
        env=_serve_env(tmp_path, DATABASE_URL=primary.url(), DATABASE_REPLICA_URLS=replica),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert "DATABASE_REPLICA_URLS:" in done.stderr and "is a primary" in done.stderr
    assert "hunter2-never-shown" not in done.stderr + done.stdout


def test_serve_reads_from_the_replica_and_readyz_shows_it(pair: Pair, tmp_path: Path) -> None:
    primary, standby = pair
    env = _serve_env(
        tmp_path,
        # Standby first: libpq skips it for the writable primary.
        DATABASE_URL=f"postgresql://postgres@127.0.0.1:{standby.port},127.0.0.1:{primary.port}/ownsona",
        DATABASE_REPLICA_URLS=standby.url(),
    )
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "scripts.cli", "serve"], env=env,
            stdout=subprocess.DEVNULL, stderr=out,
        )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{env['PORT']}/readyz"

        def ready() -> bool:
            assert server.poll() is None, log.read_text()
            try:
                return httpx.get(url, timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until("the server to be ready", ready, deadline_s=120)
        body = httpx.get(url, timeout=5).json()
        assert [(r["name"], r["state"]) for r in body["replicas"]] == [
            (f"127.0.0.1:{standby.port}/ownsona", "ok")
        ]
    finally:
        server.terminate()
        server.wait(timeout=60)
