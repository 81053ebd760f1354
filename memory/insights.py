"""The console's statistics beyond ``memory_stats`` (issue 15, /console/stats).

Memories added per week and tool calls per day, every period present (a
quiet week is a zero, not a gap), newest last. Weeks start on Monday and
days at midnight, both UTC.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING

from storage import insights as store

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool


@dataclass(frozen=True)
class Period:
    start: date
    count: int


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def _filled(rows: Sequence[store.PeriodCount], starts: list[date]) -> list[Period]:
    counts = {r.start: r.count for r in rows}
    return [Period(s, counts.get(s, 0)) for s in starts]


async def memories_added_per_week(
    pool: AsyncConnectionPool, user_id: int, *, weeks: int = 12, now: datetime | None = None
) -> list[Period]:
    """The last ``weeks`` weeks, this one included: memories stored in each."""
    today = (now or datetime.now(UTC)).astimezone(UTC).date()
    this_week = today - timedelta(days=today.weekday())
    starts = [this_week - timedelta(weeks=n) for n in range(weeks - 1, -1, -1)]
    async with pool.connection() as conn:
        rows = await store.memories_added_per_week(conn, user_id, _midnight(starts[0]))
    return _filled(rows, starts)


async def recall_calls_per_day(
    pool: AsyncConnectionPool,
    user_id: int,
    tools: Sequence[str],
    *,
    days: int = 30,
    now: datetime | None = None,
) -> list[Period]:
    """The last ``days`` days, today included: audited calls of ``tools`` on each (the
    console names the tools that read memories for an answer)."""
    today = (now or datetime.now(UTC)).astimezone(UTC).date()
    starts = [today - timedelta(days=n) for n in range(days - 1, -1, -1)]
    async with pool.connection() as conn:
        rows = await store.tool_calls_per_day(conn, user_id, tools, _midnight(starts[0]))
    return _filled(rows, starts)
