"""On Citus, a large user's own HNSW index is planned against their shard (issue 32).

A user qualifies for an own index while holding less than 1/2 of what their HNSW
scan walks. On one node that is the table; on Citus it is the user's shard of
``memories`` (the coordinator's estimate of a distributed table is 0: with it,
nobody would ever qualify). Alice shares her shard with the larger Carol: she
qualifies. Bob, alone on his shard, and Carol, most of hers, do not, though each
holds less than 1/2 of the whole store.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from memory.own_indexes import keep_own_indexes
from scripts.cluster.citus_nodes import CitusCluster
from storage import own_indexes, terms
from tests.conftest import TEST_DIMENSIONS, make_user
from tests.storage.vectors import copy_rows, unit

_MIN_ROWS = 100


def _own_indexes(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE i.indrelid = 'memories'::regclass"
            " AND c.relname LIKE 'memories_embedding_user_%'"
        ).fetchall()
    return {str(r[0]) for r in rows}


@pytest.fixture(autouse=True)
def _drop_own_indexes(clean_db: str) -> Iterator[None]:
    """Own indexes outlive the rows a test deletes; the next test's users reuse the ids."""
    yield
    with psycopg.connect(clean_db, autocommit=True) as conn:
        for name in _own_indexes(clean_db):
            conn.execute(f"DROP INDEX IF EXISTS {name}")


def _two_on_one_shard(dsn: str) -> tuple[int, int]:
    """Two new users whose rows share one shard of ``memories``.

    New users, not the fixtures': an earlier test of the session may have isolated a
    fixture user onto a shard of their own (``isolate_tenant_to_new_shard``), where no
    other id can ever land.
    """
    with psycopg.connect(dsn) as conn:
        seen: dict[int, int] = {}
        for n in range(64):
            user = make_user(dsn, f"shard-mate{n}")
            row = conn.execute(
                "SELECT get_shard_id_for_distribution_column('memories', %s::bigint)", (user,)
            ).fetchone()
            assert row is not None
            if int(row[0]) in seen:
                return seen[int(row[0])], user
            seen[int(row[0])] = user
    raise AssertionError("no two user ids hashed to the same shard")


def _on_another_worker(dsn: str, citus: CitusCluster, user: int) -> int:
    """A new user whose shard is on another worker than ``user``'s."""
    for n in range(64):
        other = make_user(dsn, f"elsewhere{n}")
        if citus.worker_of(other) is not citus.worker_of(user):
            return other
    raise AssertionError("no user id hashed to the other worker")


async def _store(pool: AsyncConnectionPool, dsn: str, owners: dict[int, int]) -> None:
    """COPY ``count`` rows for each owner, count their statistics, analyse every shard."""
    rng = np.random.default_rng(32)
    with psycopg.connect(dsn) as conn:
        for owner, count in owners.items():
            copy_rows(conn, [owner] * count, unit(rng.normal(size=(count, TEST_DIMENSIONS))), "")
    async with pool.connection() as aconn:
        for owner in owners:
            await terms.recount(aconn, owner)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE memories")


async def test_a_user_is_weighed_against_their_shard(
    clean_db: str, pool: AsyncConnectionPool, citus: CitusCluster
) -> None:
    alice, carol = _two_on_one_shard(clean_db)
    bob = _on_another_worker(clean_db, citus, alice)
    # Whole store 490 rows: on one node all three would qualify (each < 245).
    await _store(pool, clean_db, {alice: 110, carol: 180, bob: 200})

    async with own_indexes.maintenance_connection(pool) as conn:
        plan = await own_indexes.own_index_plan(conn, min_rows=_MIN_ROWS)
    assert plan.build == [alice] and plan.drop == []

    done = await keep_own_indexes(pool, min_rows=_MIN_ROWS)
    assert done.locked and done.built == [alice] and done.failed == []
    assert _own_indexes(clean_db) == {own_indexes.own_index_name(alice)}
    again = await keep_own_indexes(pool, min_rows=_MIN_ROWS)
    assert again.built == [] and again.dropped == []
