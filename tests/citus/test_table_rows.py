"""On Citus, the exact-or-index choice weighs a user against their shard (issue 32).

``storage.memory_sql.TABLE_ROWS`` is the size of what the user's HNSW scan walks. On
one node that is the table; on Citus it is the user's shard of ``memories``, whose
estimate only the worker holding it has (the coordinator's says nothing about a shard).
Two users on two workers, each alone on their shard, each read their own shard's size.
"""

from __future__ import annotations

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from scripts.cluster.citus_nodes import CitusCluster
from storage.citus_layout import SHARD_ROWS_BODY
from storage.memory_sql import TABLE_ROWS
from storage.migrate import migrate
from tests.conftest import TEST_DIMENSIONS


def _store(dsn: str, user: int, count: int) -> None:
    vectors = np.random.default_rng(user).normal(size=(count, TEST_DIMENSIONS))
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        with conn.cursor().copy(
            "COPY memories (user_id, text, normalized_text, embedding,"
            " embedding_provider, embedding_model) FROM STDIN"
        ) as copy:
            for i, vector in enumerate(vectors.astype(np.float32)):
                copy.write_row((user, f"m{i}", f"m{i}", vector, "test", "test"))


def _estimate_read_by(dsn: str, user: int) -> float:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            sql.SQL("SELECT {} FROM memories m WHERE m.user_id = %(user_id)s LIMIT 1").format(
                sql.SQL(TABLE_ROWS)
            ),
            {"user_id": user},
        ).fetchone()
    assert row is not None
    return float(row[0])


def test_each_user_reads_the_estimate_of_their_own_shard(dsn: str, alice: int, bob: int) -> None:
    _store(dsn, alice, 300)
    _store(dsn, bob, 120)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE memories")  # Citus analyses every shard
    assert _estimate_read_by(dsn, alice) == 300
    assert _estimate_read_by(dsn, bob) == 120


#: The Citus body before the shard's oid became an InitPlan (compared with
#: ``pg_class.oid`` directly, the volatile shard lookup made it a scan of ``pg_class``).
_EARLIER_BODY = """
CREATE OR REPLACE FUNCTION ownsona_memories_rows(owner bigint) RETURNS real
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT coalesce((SELECT c.reltuples FROM pg_class c WHERE c.oid = to_regclass(
        'memories_' || get_shard_id_for_distribution_column('memories', owner))), -1) $$
"""


def _catalog_pages_read_on_worker(worker_dsn: str, user: int) -> int:
    """Shared buffers one call of the estimate reads on the worker holding ``user``."""
    with psycopg.connect(worker_dsn, autocommit=True) as conn:
        conn.execute("SELECT ownsona_memories_rows(%s)", (user,))  # caches warmed
        plan = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT ownsona_memories_rows(%s)", (user,)
        ).fetchone()
    assert plan is not None
    top = plan[0][0]["Plan"]
    return int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))


async def test_the_estimate_is_one_catalog_lookup_and_replaces_an_earlier_body(
    dsn: str, citus: CitusCluster, alice: int
) -> None:
    """The estimate is read in every recall: a scan of the worker's ``pg_class`` (every
    shard of every table: hundreds of pages on a real worker) would cost each recall
    milliseconds. A cluster migrated with the earlier body gets the current one on
    every worker from the next ``ownsona migrate``."""
    _store(dsn, alice, 50)
    worker = citus.worker_of(alice).dsn()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE memories")
        conn.execute(_EARLIER_BODY)  # Citus propagates it to the workers
    try:
        scanned = _catalog_pages_read_on_worker(worker, alice)
        await migrate(dsn, dimensions=TEST_DIMENSIONS)
        for node in citus.workers:
            with psycopg.connect(node.dsn(), autocommit=True) as conn:
                row = conn.execute(
                    "SELECT prosrc FROM pg_proc"
                    " WHERE oid = 'ownsona_memories_rows(bigint)'::regprocedure"
                ).fetchone()
            assert row is not None and row[0] == SHARD_ROWS_BODY
        looked_up = _catalog_pages_read_on_worker(worker, alice)
    finally:
        await migrate(dsn, dimensions=TEST_DIMENSIONS)
    assert looked_up * 5 < scanned
    assert _estimate_read_by(dsn, alice) == 50
