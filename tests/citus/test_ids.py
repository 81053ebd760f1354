"""A memory id names one memory forever on Citus (issue 32; mcp-tools.texi, "Memory ID").

Ids come from the node an INSERT is sent to. Through the coordinator (what
``DATABASE_URL`` names) they come from its sequence, with migration 0019's timeline
blocks as on one node. Through a worker (Citus's query-from-any-node), from the range
Citus gives that worker's sequence: its group id times 2^48, so the ranges never meet,
and every id stays below 2^53 (the largest integer a JSON client keeps exactly) for up
to 31 worker groups. A shard move copies rows, ids included.
"""

from __future__ import annotations

import psycopg
from pgvector.psycopg import register_vector

from scripts.cluster.citus_nodes import CitusCluster
from tests.service.helpers import call

JSON_SAFE = 2**53


def _insert_through(dsn: str, user: int, text: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        row = conn.execute(
            "INSERT INTO memories (user_id, text, normalized_text, embedding,"
            " embedding_provider, embedding_model)"
            " VALUES (%s, %s, %s, array_fill(0.1::real, ARRAY[384])::vector, 'test', 'test')"
            " RETURNING id",
            (user, text, text.lower()),
        ).fetchone()
    assert row is not None
    return int(row[0])


async def test_ids_from_the_coordinator_and_each_worker_never_meet_and_stay_json_safe(
    citus: CitusCluster, deps, alice: int, bob: int
) -> None:
    through_coordinator = [
        (await call(deps, user, "remember", text=f"Fact {n} of {user}."))["memory_id"]
        for n in range(3)
        for user in (alice, bob)
    ]
    through_workers = {
        worker.name: [
            _insert_through(worker.dsn(), user, f"Written on {worker.name} for {user}.")
            for user in (alice, bob)
        ]
        for worker in citus.workers
    }
    every = through_coordinator + [i for ids in through_workers.values() for i in ids]
    assert len(set(every)) == len(every)
    assert all(0 < i < JSON_SAFE for i in every)
    assert max(through_coordinator) < 2**48
    for group, worker in enumerate(citus.workers, start=1):
        assert all(group * 2**48 < i < (group + 1) * 2**48 for i in through_workers[worker.name])
    # Each id reads back as its memory, for its owner only.
    for user in (alice, bob):
        mine = await call(deps, user, "list_memories", limit=50)
        assert {m["id"] for m in mine["memories"]} <= set(every)


async def test_a_memory_keeps_its_id_and_text_across_a_shard_move(
    citus: CitusCluster, deps, alice: int
) -> None:
    facts = ["My sister Ana lives in Porto.", "I am allergic to peanuts.", "I play the cello."]
    ids = [(await call(deps, alice, "remember", text=fact))["memory_id"] for fact in facts]
    source = citus.worker_of(alice)
    target = next(worker for worker in citus.workers if worker is not source)
    shard = citus.coordinator.sql(
        f"SELECT get_shard_id_for_distribution_column('memories', {alice})"
    )
    # block_writes: the colocated per-user tables move with it, in one go.
    citus.coordinator.sql(
        f"SELECT citus_move_shard_placement({shard}, '127.0.0.1', {source.port},"
        f" '127.0.0.1', {target.port}, shard_transfer_mode => 'block_writes')"
    )
    assert citus.worker_of(alice) is target
    for memory_id, fact in zip(ids, facts, strict=True):
        got = await call(deps, alice, "get_memory", id=memory_id)
        assert got["memory"]["text"] == fact
    later = (await call(deps, alice, "remember", text="I moved to Braga."))["memory_id"]
    assert later not in ids and later > max(ids)
