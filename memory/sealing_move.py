"""``ownsona seal``: every user's plain memories moved to sealed storage (docs/at-rest.md).

One user at a time, in batches (``storage.sealing_move``); resumable, and safe
while the server serves: run it once every process writes sealed
(``OWNSONA_SEAL_MEMORIES`` and a master key), so that no new plain row appears.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from memory.keyring import Keyring
from storage import sealing_move, sealing_move_around
from storage.sealing.user_keys import UserKeys


class _Batch(Protocol):
    """One batch of a move: seals up to ``limit`` of the user's plain rows; how many."""

    def __call__(self, conn: AsyncConnection, keys: UserKeys, *, limit: int) -> Awaitable[int]: ...


#: Rows per transaction: short enough that a writer of the user waits little.
DEFAULT_BATCH = 200


async def plain_rows(pool: AsyncConnectionPool) -> int:
    async with pool.connection() as conn:
        return sum((await sealing_move.plain_rows_per_user(conn)).values())


async def seal_store(
    pool: AsyncConnectionPool,
    keyring: Keyring,
    *,
    batch: int = DEFAULT_BATCH,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Seal every plain memory row and relation edge; return how many memory rows were
    sealed. ``progress(n)`` after each batch of memories.

    Then the plain values around the memories (:func:`seal_around`), not counted.
    """
    done = 0
    async with pool.connection() as conn:
        users = await sealing_move.plain_rows_per_user(conn)
        with_edges = await sealing_move.users_with_plain_edges(conn)
    for user_id in sorted({*users, *with_edges}):
        keys = await keyring.user_keys(user_id)
        done += await _drain(pool, sealing_move.seal_batch, keys, batch, progress)
        # The user's relation edges (migration 0024); not counted: the count is of memories.
        await _drain(pool, sealing_move.seal_edges_batch, keys, batch)
    await seal_around(pool, keyring, batch=batch)
    return done


async def seal_around(
    pool: AsyncConnectionPool, keyring: Keyring, *, batch: int = DEFAULT_BATCH
) -> int:
    """Seal the plain write receipts, chat-import uploads and recorded audit queries
    (``storage.sealing_move_around``); how many rows."""
    done = 0
    async with pool.connection() as conn:
        users = await sealing_move_around.plain_users(conn)
    for user_id in users:
        keys = await keyring.user_keys(user_id)
        done += await _drain(pool, sealing_move_around.seal_batch, keys, batch)
    return done


async def _drain(
    pool: AsyncConnectionPool,
    step: _Batch,
    keys: UserKeys,
    batch: int,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Run ``step`` (one batch of ``keys``' user, its own transaction) until it seals
    nothing; how many it sealed."""
    done = 0
    while True:
        async with pool.connection() as conn, conn.transaction():
            sealed = await step(conn, keys, limit=batch)
        if not sealed:
            return done
        done += sealed
        if progress is not None:
            progress(sealed)
