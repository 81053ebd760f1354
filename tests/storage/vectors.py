"""Seeding a user's store with given vectors, for the tests of the nearest-row searches."""

from __future__ import annotations

import numpy as np
import psycopg
from pgvector.psycopg import register_vector


def unit(v: np.ndarray) -> np.ndarray:
    """Rows (or one vector) scaled to length 1, as float32."""
    out: np.ndarray = (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)
    return out


def copy_rows(
    conn: psycopg.Connection, owners: list[int], vectors: np.ndarray, prefix: str
) -> None:
    """COPY one row per vector, row ``i`` owned by ``owners[i]`` (the caller commits)."""
    register_vector(conn)
    with (
        conn.cursor() as cur,
        cur.copy(
            "COPY memories (user_id, text, normalized_text, embedding, embedding_provider,"
            " embedding_model, tags) FROM STDIN"
        ) as copy,
    ):
        for i, (owner, v) in enumerate(zip(owners, vectors, strict=True)):
            text = f"{prefix} row {i}".strip()
            copy.write_row([owner, text, text, v, "test", "test", ["t"]])


def seed(dsn: str, user_id: int, vectors: np.ndarray, prefix: str = "") -> list[int]:
    """COPY one row per vector into the user's store, then ANALYZE; the ids in order."""
    with psycopg.connect(dsn) as conn:
        copy_rows(conn, [user_id] * len(vectors), vectors, prefix)
        ids = [
            int(r[0])
            for r in conn.execute(
                "SELECT id FROM memories WHERE user_id = %s ORDER BY id", (user_id,)
            ).fetchall()
        ]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE memories")
    return ids
