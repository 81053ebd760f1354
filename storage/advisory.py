"""Waiting for a session advisory lock without holding a snapshot meanwhile.

``SELECT pg_advisory_lock(...)`` waits inside a running statement, and a running
statement holds a snapshot. ``CREATE INDEX CONCURRENTLY`` waits, before it ends, for
every transaction whose snapshot is older than its own: when the session holding
the lock is the one building the index (a migration, a user's own-index build),
the waiter and the build wait for each other until PostgreSQL's deadlock check
cancels one of them, and a migration retried after that only meets the same cycle
again. Asking with ``pg_try_advisory_lock`` between short pauses holds no snapshot
while it waits.
"""

from __future__ import annotations

import asyncio

from psycopg import AsyncConnection

#: The first pause between two tries, doubling to :data:`LONGEST_PAUSE_S`.
FIRST_PAUSE_S = 0.02
LONGEST_PAUSE_S = 0.5


async def wait_for_advisory_lock(conn: AsyncConnection, *key: int) -> None:
    """Take the session advisory lock ``key`` (one bigint, or two ints), waiting as long
    as it is held elsewhere, between statements rather than inside one."""
    args = ", ".join(["%s"] * len(key))
    pause = FIRST_PAUSE_S
    while True:
        cur = await conn.execute(f"SELECT pg_try_advisory_lock({args})", key)
        row = await cur.fetchone()
        if row is not None and row[0]:
            return
        await asyncio.sleep(pause)
        pause = min(LONGEST_PAUSE_S, pause * 2)
