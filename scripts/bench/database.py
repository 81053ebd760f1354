"""The benchmarks' direct database access: COPY seeding, plain new rows, one pooled connection."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
import psycopg
from psycopg import sql
from psycopg.copy import Copy

from storage.pool import make_pool
from storage.rows import NewMemory

T = TypeVar("T")

#: The columns every seeded row fills, each with its binary COPY type.
SEED_COLUMNS: tuple[tuple[str, str], ...] = (
    ("user_id", "int8"),
    ("text", "text"),
    ("normalized_text", "text"),
    ("embedding", "vector"),
    ("embedding_provider", "text"),
    ("embedding_model", "text"),
    ("tags", "text[]"),
)


@contextmanager
def copy_memories(
    conn: psycopg.Connection[Any], extra_columns: Sequence[tuple[str, str]] = ()
) -> Iterator[Copy]:
    """A binary ``COPY memories`` of :data:`SEED_COLUMNS` then ``extra_columns``.

    Each row written to the yielded copy lists its values in that column order; the
    connection needs pgvector's types registered (``register_vector``).
    """
    columns = (*SEED_COLUMNS, *extra_columns)
    query = sql.SQL("COPY memories ({}) FROM STDIN WITH (FORMAT BINARY)").format(
        sql.SQL(", ").join(sql.Identifier(name) for name, _ in columns)
    )
    with conn.cursor() as cur, cur.copy(query) as copy:
        copy.set_types([kind for _, kind in columns])
        yield copy


def new_row(text: str, vector: np.ndarray, *, model: str, normalized: str) -> NewMemory:
    """A row as ``remember`` stores it when no optional field is given (provider local)."""
    return NewMemory(
        text=text,
        normalized_text=normalized,
        embedding=vector,
        embedding_provider="local",
        embedding_model=model,
        tags=[],
        importance=0.5,
        keep=False,
        source_provider=None,
        capture_mode=None,
        session_id=None,
        last_confirmed_at=None,
        expires_at=None,
        occurred_at=None,
        valid_from=None,
        valid_to=None,
        occurred_at_parsed=False,
    )


def on_one_connection(
    dsn: str, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]], *, name: str
) -> T:
    """Run ``work`` on the one connection of a pool set up as the server's (``make_pool``)."""

    async def run() -> T:
        pool = make_pool(dsn, min_size=1, max_size=1, name=name)
        await pool.open(wait=True)
        try:
            async with pool.connection() as conn:
                return await work(conn)
        finally:
            await pool.close()

    return asyncio.run(run())
