"""``/console/stats``: the store in figures and charts.

The counts, top tags and sources are the ``memory_stats`` tool's; memories
added per week and recall calls per day (from the audit log) come from
:mod:`memory.insights`; memories written per app from the rows themselves
(:mod:`memory.provenance`, so the figure outlives the audit log's retention).
Every chart is drawn on the server (:mod:`api.console.charts`) and its figures
are in a table beside it.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from datetime import date
from typing import Any

import falcon.asgi

from api.console import charts
from api.console.activity import OWN_APPS
from api.console.services import ConsoleServices
from api.console.tools import failure
from memory import insights, provenance

WEEKS = 12
DAYS = 30
#: The tools that read memories for an assistant's answer: "recall calls".
RECALL_TOOLS = ("recall", "search_memory", "build_context_prompt")


def _app_name(client_id: str | None) -> str:
    """Our own callers by name (the activity page's table); an OAuth client by its id."""
    if client_id is None:
        return "Not recorded"  # rows from before writers were recorded, or restored ones
    return OWN_APPS.get(client_id, client_id)


def _short(day: date) -> str:
    return f"{day:%b} {day.day}"


class StatsPage:
    def __init__(self, services: ConsoleServices) -> None:
        self._s = services

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        user_id = req.context.console.user_id
        # The three parts read different rows on their own pooled connections, so
        # the page waits for the slowest (memory_stats), not for their sum.
        stats, weeks, days, writers = await asyncio.gather(
            self._s.tools.call(user_id, "memory_stats", {}),
            insights.memories_added_per_week(self._s.pool, user_id, weeks=WEEKS),
            self._recall_days(user_id),
            provenance.written_counts(self._s.pool, user_id),
        )
        written: dict[str, int] = defaultdict(int)
        for writer in writers:
            written[_app_name(writer.client_id)] += writer.total
        problem = failure(stats)
        if problem is not None:
            self._s.renderer.error(req, resp, 503, "Stats are not available", problem.message)
            return
        self._s.renderer.page(
            req, resp, "stats.html", title="Stats", **_context(stats, weeks, days, written)
        )

    async def _recall_days(self, user_id: int) -> list[insights.Period]:
        """Recall calls per day, the audit log caught up first."""
        if self._s.runtime.audit is not None:
            await self._s.runtime.audit.catch_up()
        return await insights.recall_calls_per_day(self._s.pool, user_id, RECALL_TOOLS, days=DAYS)


def _context(
    stats: dict[str, Any],
    weeks: list[insights.Period],
    days: list[insights.Period],
    written: dict[str, int],
) -> dict[str, Any]:
    week_bars = [
        charts.Bar(f"Week of {w.start.isoformat()}", w.count, _short(w.start)) for w in weeks
    ]
    day_bars = [charts.Bar(d.start.isoformat(), d.count, _short(d.start)) for d in days]
    tag_bars = [charts.Bar(t["tag"], int(t["count"])) for t in stats.get("top_tags", [])]
    app_bars = [
        charts.Bar(name, count)
        for name, count in sorted(written.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    state = [
        charts.Part("Active", int(stats.get("active", 0)), "part-active"),
        charts.Part("Forgotten", int(stats.get("soft_deleted", 0)), "part-forgotten"),
        charts.Part("Expired", int(stats.get("expired", 0)), "part-expired"),
    ]
    return {
        "stats": stats,
        "recall_today": days[-1].count if days else 0,
        "recall_total": sum(d.count for d in days),
        "state": state,
        "state_chart": charts.stacked_bar("chart-state", "Active and forgotten memories", state),
        "weeks": week_bars,
        "weeks_chart": charts.column_chart(
            "chart-weeks", f"Memories added per week, last {WEEKS} weeks", week_bars
        ),
        "days": day_bars,
        "days_chart": charts.column_chart(
            "chart-days", f"Recall calls per day, last {DAYS} days", day_bars, label_every=5
        ),
        "tags": tag_bars,
        "tags_chart": charts.bar_chart("chart-tags", "Top tags of active memories", tag_bars),
        "apps": app_bars,
        "apps_chart": charts.bar_chart("chart-apps", "Memories written by each app", app_bars),
    }


def routes(services: ConsoleServices) -> list[tuple[str, object]]:
    return [("/console/stats", StatsPage(services))]
