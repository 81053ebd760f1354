"""A user's shard moves to the other worker, then the user gets a shard of their own, while
they write: no acknowledged write is lost, no id changes, and any error met is the
documented retryable one (issue 32, docs/scaling.md runbook)."""

from __future__ import annotations

import asyncio
from typing import Any

from memory.errors import MemoryServiceError
from scripts.cluster.citus_nodes import CitusCluster
from tests.service.helpers import call


async def _write_until(
    deps: Any, user: int, stop: asyncio.Event, acked: dict[int, str], errors: list[str]
) -> None:
    n = 0
    while not stop.is_set():
        text = f"Note number {n} about the garden."
        n += 1
        try:
            acked[(await call(deps, user, "remember", text=text))["memory_id"]] = text
        except MemoryServiceError as ex:
            errors.append(ex.code)


async def test_a_shard_move_and_a_tenant_isolation_under_writes_lose_nothing(
    citus: CitusCluster, deps, alice: int, bob: int
) -> None:
    acked: dict[int, str] = {}
    errors: list[str] = []
    stop = asyncio.Event()
    writer = asyncio.create_task(_write_until(deps, alice, stop, acked, errors))
    try:
        while len(acked) < 3:  # writing before the move starts
            await asyncio.sleep(0.05)
        source = citus.worker_of(alice)
        target = next(w for w in citus.workers if w is not source)
        shard = citus.coordinator.sql(
            f"SELECT get_shard_id_for_distribution_column('memories', {alice})"
        )
        await asyncio.to_thread(
            citus.coordinator.sql,
            f"SELECT citus_move_shard_placement({shard}, '127.0.0.1', {source.port},"
            f" '127.0.0.1', {target.port}, shard_transfer_mode => 'block_writes')",
        )
        moved = len(acked)
        await asyncio.to_thread(
            citus.coordinator.sql,
            f"SELECT isolate_tenant_to_new_shard('memories', {alice},"
            " cascade_option => 'CASCADE', shard_transfer_mode => 'block_writes')",
        )
        while len(acked) < moved + 3:  # writing after both
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await writer
    assert citus.worker_of(alice) is target
    own = citus.coordinator.sql(
        "SELECT shardminvalue = shardmaxvalue FROM pg_dist_shard"
        f" WHERE shardid = get_shard_id_for_distribution_column('memories', {alice})"
    )
    assert own == "t", "alice has a shard of her own"
    assert set(errors) <= {"DATABASE_ERROR"}, errors
    listed = await call(deps, alice, "list_memories", limit=len(acked) + 10)
    assert {m["id"]: m["text"] for m in listed["memories"]} == acked
    # Bob, on the other worker all along, still has his rows.
    assert (await call(deps, bob, "count_memories"))["count"] == 0
