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

from storage.memory_sql import TABLE_ROWS
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
