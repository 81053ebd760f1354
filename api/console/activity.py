"""``/console/activity``: the audit log of the owner's tool calls, newest first.

Every call through the tool dispatcher (an assistant over MCP or stdio, the
console itself) and every run of an ``ownsona`` command that reads or changes
memories is on record: when, which app and entry point, which tool, which
memory ids it read and changed, the outcome and the duration; the query
text only when ``AUDIT_RECORD_QUERIES`` is on. Filters by app, tool and
memory are query parameters; pages go back by keyset (``?before=<id>``).
"""

from __future__ import annotations

from dataclasses import dataclass

import falcon.asgi

from api.console.forms import positive_id
from api.console.guard import ConsoleRequest
from api.console.services import ConsoleServices
from api.console.tools import CONSOLE_CLIENT_ID
from auth import connected_apps
from memory import audit
from memory.audit import AuditEventRow
from memory.call_keys import call_scope

PAGE_SIZE = 50
#: Memory ids shown per cell; the rest are counted.
IDS_SHOWN = 20

ENTRY_LABELS = {
    "mcp": "MCP (HTTP)",
    "stdio": "MCP (stdio)",
    "console": "Console",
    "cli": "Command line",
}
#: Our own apps' names; OAuth clients are named by what they registered or published.
OWN_APPS = {
    CONSOLE_CLIENT_ID: "Console",
    connected_apps.CLI_CLIENT_ID: "CLI token",
    audit.COMMAND_CLIENT_ID: "ownsona command",
}


@dataclass(frozen=True)
class Filters:
    app: str | None
    tool: str | None
    memory: int | None
    before: int | None

    def params(self, **changes: object) -> dict[str, object]:
        base: dict[str, object] = {
            "app": self.app,
            "tool": self.tool,
            "memory": self.memory,
            "before": self.before,
        }
        base.update(changes)
        return base


def _positive(raw: str | None) -> int | None | str:
    """A positive integer parameter; None when absent; the string "bad" when malformed."""
    if raw is None or raw.strip() == "":
        return None
    value = positive_id(raw)
    return "bad" if value is None else value


class ActivityPage:
    def __init__(self, services: ConsoleServices) -> None:
        self._s = services

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        console: ConsoleRequest = req.context.console
        memory = _positive(req.get_param("memory"))
        before = _positive(req.get_param("before"))
        if isinstance(memory, str) or isinstance(before, str):
            message = "The memory and page parameters must be positive whole numbers."
            self._s.renderer.error(req, resp, 400, "Not a valid filter", message)
            return
        filters = Filters(
            app=req.get_param("app") or None,
            tool=req.get_param("tool") or None,
            memory=memory,
            before=before,
        )
        if self._s.runtime.audit is not None:
            await self._s.runtime.audit.catch_up()  # the owner's own latest calls show
        pool = self._s.pool
        user_id = console.user_id
        choices = await audit.choices(pool, user_id)
        where = audit.EventFilter(
            client_id=filters.app,
            tool=filters.tool,
            memory_id=filters.memory,
            before_id=filters.before,
            limit=PAGE_SIZE + 1,
        )
        # The owner's keys: a recorded query is sealed when their memories are.
        scope = await call_scope(self._s.runtime.deps, user_id)
        rows = await audit.events(pool, user_id, where, scope)
        older = rows[PAGE_SIZE - 1].id if len(rows) > PAGE_SIZE else None
        rows = rows[:PAGE_SIZE]
        names = await self._app_names(user_id, choices.client_ids)
        self._s.renderer.page(
            req,
            resp,
            "activity.html",
            title="Activity",
            rows=rows,
            filters=filters,
            older=older,
            apps=[(c, names.get(c, c)) for c in choices.client_ids],
            tools=choices.tools,
            app_name=lambda row: self._app_label(row, names),
            entry_labels=ENTRY_LABELS,
            ids_shown=IDS_SHOWN,
            show_queries=any(r.query is not None for r in rows),
            duration=_duration,
            seconds=_seconds,
        )

    async def _app_names(self, user_id: int, client_ids: list[str]) -> dict[str, str]:
        names = dict(OWN_APPS)
        others = [c for c in client_ids if c not in OWN_APPS]
        names.update(await connected_apps.client_names(self._s.pool, others))
        for client_id in others:
            if client_id not in names:
                host = connected_apps.published_from(client_id)
                names[client_id] = host or client_id
        return names

    @staticmethod
    def _app_label(row: AuditEventRow, names: dict[str, str]) -> str:
        if row.client_id is None:
            return "—"
        return names.get(row.client_id, row.client_id)


def _duration(ms: float) -> str:
    return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.1f} ms"


def _seconds(row: AuditEventRow) -> str:
    return row.at.strftime("%Y-%m-%d %H:%M:%S UTC")


def routes(services: ConsoleServices) -> list[tuple[str, object]]:
    return [("/console/activity", ActivityPage(services))]
