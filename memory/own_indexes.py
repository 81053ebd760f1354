"""Keeps large users' own HNSW indexes in step with their size (``storage.own_indexes``).

Every web process runs :func:`own_indexes_forever`; one at a time does the work
(a session advisory lock, on a connection of its own rather than the pool's), so
several processes never build the same index. A
pass builds the indexes of users who newly qualify, one after the other, and
drops those of users who no longer do. A build of 100,000 rows takes minutes on
two cores; reads and writes go on meanwhile (``CREATE INDEX CONCURRENTLY``), the
user's recall served by the table-wide index until the new one is valid.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

import psycopg
from psycopg_pool import AsyncConnectionPool

from storage import own_indexes as store

_log = logging.getLogger(__name__)

#: Seconds between passes. A user crossing the bound waits at most this long (plus
#: the build) for their own index; meanwhile the table-wide one serves them.
OWN_INDEX_INTERVAL_S = 600.0
#: Seconds after start-up before the first pass: a short-lived process (``ownsona
#: stdio``, a one-off command) never starts a build it would cancel when it exits.
OWN_INDEX_FIRST_PASS_S = 60.0


@dataclass
class OwnIndexPass:
    """What one pass did (``locked`` False: another process holds the lock; nothing done)."""

    locked: bool = True
    built: list[int] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    #: Users whose build failed this time.
    failed: list[int] = field(default_factory=list)


async def keep_own_indexes(
    pool: AsyncConnectionPool,
    *,
    min_rows: int = store.OWN_INDEX_MIN_ROWS,
    max_share: int = store.OWN_INDEX_MAX_SHARE,
) -> OwnIndexPass:
    """One pass: build what is due, drop what is no longer needed."""
    done = OwnIndexPass()
    async with store.maintenance_connection(pool) as conn:
        if not await store.try_lock_own_indexes(conn):
            done.locked = False
            return done
        # The lock goes with the connection when it closes.
        plan = await store.own_index_plan(conn, min_rows=min_rows, max_share=max_share)
        for name in plan.drop:
            await store.drop_own_index(conn, name)
            done.dropped.append(name)
            _log.info("dropped %s: its user no longer needs an own index", name)
        for user_id in plan.build:
            started = time.perf_counter()
            try:
                await store.build_own_index(conn, user_id)
            except psycopg.Error as ex:
                # One user's failing build must not keep the others waiting: the
                # next pass starts over (and first drops what this one left invalid).
                done.failed.append(user_id)
                _log.warning(
                    "building the own HNSW index of user %s failed (%s); next pass retries",
                    user_id,
                    type(ex).__name__,
                )
                continue
            done.built.append(user_id)
            _log.info(
                "built the own HNSW index of user %s in %.1fs",
                user_id,
                time.perf_counter() - started,
            )
    return done


async def own_indexes_forever(
    pool: AsyncConnectionPool,
    *,
    first_after_s: float = OWN_INDEX_FIRST_PASS_S,
    interval_s: float = OWN_INDEX_INTERVAL_S,
) -> None:
    """A pass ``first_after_s`` after start, then every ``interval_s``, until cancelled;
    never raises."""
    await asyncio.sleep(first_after_s)
    while True:
        try:
            await keep_own_indexes(pool)
        except asyncio.CancelledError:
            raise
        except Exception:
            _log.warning(
                "keeping large users' own indexes failed; it runs again in %gs",
                interval_s,
                exc_info=True,
            )
        await asyncio.sleep(interval_s)
