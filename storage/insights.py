"""Statistics SQL for the console's stats page that no tool answers (issue 15).

The per-period queries read one user's rows through an index that starts
with ``user_id`` and the time column (``memories_user_created``,
``audit_events_user_at``), bounded by a start time, so they stay fast however
large the store is. The per-app count reads the audit log once (it is pruned
after ``AUDIT_RETENTION_DAYS``). Every function takes a connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

from psycopg import AsyncConnection
from psycopg.rows import class_row


@dataclass(frozen=True)
class PeriodCount:
    #: The first day (UTC) of the week or the day itself.
    start: date
    count: int


async def memories_added_per_week(
    conn: AsyncConnection, user_id: int, since: datetime
) -> list[PeriodCount]:
    """Memories stored since ``since`` (forgotten ones too), per ISO week (Monday, UTC)."""
    async with conn.cursor(row_factory=class_row(PeriodCount)) as cur:
        await cur.execute(
            """
            SELECT date_trunc('week', created_at AT TIME ZONE 'UTC')::date AS start,
                count(*)::int AS count
            FROM memories
            WHERE user_id = %s AND created_at >= %s
            GROUP BY 1 ORDER BY 1
            """,
            (user_id, since),
        )
        return await cur.fetchall()


async def tool_calls_per_day(
    conn: AsyncConnection, user_id: int, tools: Sequence[str], since: datetime
) -> list[PeriodCount]:
    """Calls of any of ``tools`` since ``since`` (failed ones too), per day (UTC)."""
    async with conn.cursor(row_factory=class_row(PeriodCount)) as cur:
        await cur.execute(
            """
            SELECT (at AT TIME ZONE 'UTC')::date AS start, count(*)::int AS count
            FROM audit_events
            WHERE user_id = %s AND at >= %s AND tool = ANY(%s)
            GROUP BY 1 ORDER BY 1
            """,
            (user_id, since, list(tools)),
        )
        return await cur.fetchall()
