"""``ownsona seal``: every user's plain memories moved to sealed storage (docs/at-rest.md).

One user at a time, in batches (``storage.sealing_move``); resumable, and safe
while the server serves: run it once every process writes sealed
(``OWNSONA_SEAL_MEMORIES`` and a master key), so that no new plain row appears.
"""

from __future__ import annotations

from collections.abc import Callable

from psycopg_pool import AsyncConnectionPool

from memory.keyring import Keyring
from storage import sealing_move, sealing_move_around

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
        while True:
            async with pool.connection() as conn, conn.transaction():
                sealed = await sealing_move.seal_batch(conn, keys, limit=batch)
            if not sealed:
                break
            done += sealed
            if progress is not None:
                progress(sealed)
        # The user's relation edges (migration 0024); not counted: the count is of memories.
        while True:
            async with pool.connection() as conn, conn.transaction():
                if not await sealing_move.seal_edges_batch(conn, keys, limit=batch):
                    break
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
        while True:
            async with pool.connection() as conn, conn.transaction():
                sealed = await sealing_move_around.seal_batch(conn, keys, limit=batch)
            if not sealed:
                break
            done += sealed
    return done
