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


@dataclass(frozen=True)
class AppWrites:
    #: None: no app (a local entry point).
    client_id: str | None
    #: Only for CLI tokens (``ownsona-cli``), which tell one token from another.
    token_jti: str | None
    memories: int


async def memories_written_per_app(conn: AsyncConnection, user_id: int) -> list[AppWrites]:
    """Distinct memories each app (each CLI token) changed in successful calls.

    The figures of ``storage.audit.app_activity``'s ``memories_written``, for the
    apps that wrote any, in one pass over the log instead of one per app.
    """
    async with conn.cursor(row_factory=class_row(AppWrites)) as cur:
        await cur.execute(
            """
            SELECT client_id,
                CASE WHEN client_id = 'ownsona-cli' THEN token_jti END AS token_jti,
                count(DISTINCT m)::int AS memories
            FROM audit_events, unnest(changed_ids) AS m
            WHERE user_id = %s AND ok AND cardinality(changed_ids) > 0
                -- app_activity counts a call without an app only if it had no token.
                AND (client_id IS NOT NULL OR token_jti IS NULL)
            GROUP BY 1, 2
            """,
            (user_id,),
        )
        return await cur.fetchall()
