"""What the clean-up page needs to show a stored scan result as the store is now.

A scan (``find_near_duplicates``, ``find_conflicts``) reads the whole store
and takes seconds at 100k memories; the console keeps its last result and
shows it with its members read again, in one query, so nothing forgotten
or edited since is offered for a resolution.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memory.rules.timestamps import format_timestamp
from memory.shapes import match_shape
from storage import scans as store
from storage.sealing.scope import Scope, sealing_as

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool


async def change_marker(pool: AsyncConnectionPool, user_id: int) -> dict[str, Any]:
    """A value that moves when the user's memories change (the newest ``updated_at``), as
    JSON, to be stored beside a scan's result and compared later.

    A hard delete does not move it (it only removes a member, which the re-read of
    :func:`current_members` drops), nor does a backup import, which keeps the file's
    timestamps (the hourly rescan, or "Scan again", finds what it brought).
    """
    async with pool.connection() as conn:
        updated_at = await store.newest_update(conn, user_id)
    return {"updated_at": format_timestamp(updated_at)}


async def current_members(
    pool: AsyncConnectionPool, user_id: int, ids: Sequence[int], scope: Scope | None
) -> dict[int, dict[str, Any]]:
    """The user's active memories among ``ids``, as the scan tools show a member.

    ``scope``: the user's keys (``memory.call_keys.call_scope``), which open sealed rows.
    """
    async with pool.connection() as conn:
        with sealing_as(scope):
            rows = await store.rows_by_ids(conn, user_id, ids)
    return {mid: match_shape(row) for mid, row in rows.items()}
