"""``/console/memories``: the owner's memories, newest first; search, filters, bulk changes.

Browsing is ``list_memories`` with its filters; a search (``?q=``) is the
hybrid ``recall`` instead, with each match's score and, on ``?explain=1``,
its ranking breakdown. The bulk form (one checkbox per row) forgets
(``forget_batch``) or adds or removes tags (``update_memory_batch``), carrying
the form's operation key so a double submit is done once, then goes back to
the same list (filters kept) with a notice of counts: fixed texts and numbers,
never anything a link could make up.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import date
from typing import Any
from urllib.parse import parse_qsl, urlencode

import falcon
import falcon.asgi

from api.console.forms import positive_id
from api.console.guard import ConsoleRequest, new_operation_key
from api.console.render import NOTICES
from api.console.services import ConsoleServices
from api.console.tools import failure
from memory.errors import MemoryServiceError
from memory.rules.text import normalize_tags

PATH = "/console/memories"
#: Rows per page when browsing; matches a search shows at first, and at most.
PAGE = 20
MAX_SEARCH = 50

#: Bulk outcomes: ``?notice=<code>&count=<n>`` (plus ``already``, ``failed``).
COUNTED = {
    "bulk-forgotten": ("{n} memory forgotten.", "{n} memories forgotten."),
    "bulk-tagged": ("Tags added to {n} memory.", "Tags added to {n} memories."),
    "bulk-untagged": ("Tags removed from {n} memory.", "Tags removed from {n} memories."),
}
NOTICES.update({code: many.format(n="Some") for code, (_one, many) in COUNTED.items()})

#: The query parameters that make up a listing (kept by the pager and after a bulk change).
FILTER_KEYS = (
    "q",
    "explain",
    "tags",
    "untagged",
    "min_chars",
    "max_chars",
    "not_confirmed_since",
    "include_deleted",
    "limit",
    "offset",
)


@dataclass
class Filters:
    """A listing's filters, as the GET form sends them (text, so the form shows them back)."""

    q: str = ""
    explain: bool = False
    tags: str = ""
    untagged: bool = False
    min_chars: str = ""
    max_chars: str = ""
    not_confirmed_since: str = ""
    include_deleted: bool = False
    limit: int = PAGE
    offset: int = 0
    problems: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, get: dict[str, str]) -> Filters:
        f = cls(
            q=get.get("q", "").strip(),
            explain=get.get("explain") == "1",
            tags=get.get("tags", "").strip(),
            untagged=get.get("untagged") == "1",
            min_chars=get.get("min_chars", "").strip(),
            max_chars=get.get("max_chars", "").strip(),
            not_confirmed_since=get.get("not_confirmed_since", "").strip(),
            include_deleted=get.get("include_deleted") == "1",
        )
        f.limit = min(max(f._whole(get.get("limit", ""), "Results", default=PAGE), 1), MAX_SEARCH)
        f.offset = f._whole(get.get("offset", ""), "Offset", default=0)
        f._whole(f.min_chars, "At least (characters)")
        f._whole(f.max_chars, "At most (characters)")
        if f.not_confirmed_since:
            try:
                date.fromisoformat(f.not_confirmed_since)
            except ValueError:
                f.problems.append("Not confirmed since must be a date (YYYY-MM-DD).")
        return f

    def _whole(self, value: str, label: str, default: int = 0) -> int:
        if not value:
            return default
        if not value.isascii() or not value.isdigit():
            self.problems.append(f"{label} must be a whole number, 0 or more.")
            return default
        return int(value)

    @property
    def tag_list(self) -> list[str]:
        return [t.strip() for t in self.tags.split(",") if t.strip()]

    @property
    def searching(self) -> bool:
        return bool(self.q)

    def params(self, **changes: Any) -> dict[str, Any]:
        """The query parameters of this listing (for ``query()``), with ``changes``."""
        out: dict[str, Any] = {
            "q": self.q,
            "explain": self.explain and self.searching,
            "tags": self.tags,
            "untagged": self.untagged,
            "min_chars": self.min_chars,
            "max_chars": self.max_chars,
            "not_confirmed_since": self.not_confirmed_since,
            "include_deleted": self.include_deleted,
            "limit": self.limit if self.limit != PAGE else None,
            "offset": self.offset or None,
        }
        out.update(changes)
        return out

    def arguments(self) -> dict[str, Any]:
        """The tool call this listing is: ``recall`` for a search, else ``list_memories``."""
        tags = {"tags": self.tag_list} if self.tag_list else {}
        if self.searching:
            return {"query": self.q, "limit": self.limit, "explain": self.explain, **tags}
        args: dict[str, Any] = {"limit": PAGE + 1, "offset": self.offset, **tags}
        if self.untagged:
            args["untagged_only"] = True
        if self.include_deleted:
            args["include_deleted"] = True
        if self.min_chars:
            args["min_chars"] = int(self.min_chars)
        if self.max_chars:
            args["max_chars"] = int(self.max_chars)
        if self.not_confirmed_since:
            args["not_confirmed_since"] = f"{self.not_confirmed_since}T00:00:00Z"
        return args


def _query_dict(req: falcon.asgi.Request) -> dict[str, str]:
    return {k: req.get_param(k) or "" for k in FILTER_KEYS if req.get_param(k) is not None}


def _counted_notice(req: falcon.asgi.Request) -> str | None:
    """The notice of a bulk change: a fixed text per code, with numbers only."""
    code = req.get_param("notice") or ""
    if code not in COUNTED:
        return NOTICES.get(code)
    numbers = {}
    for name in ("count", "already", "failed"):
        raw = req.get_param(name) or "0"
        numbers[name] = int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 7 else 0
    one, many = COUNTED[code]
    n = numbers["count"]
    text = (one if n == 1 else many).format(n=n)
    if numbers["already"]:
        text += f" {numbers['already']} had been forgotten already."
    if numbers["failed"]:
        text += (
            f" {numbers['failed']} could not be changed (gone, or kept: unlock a kept memory "
            "on its page first)."
        )
    return text


class MemoryList:
    def __init__(self, services: ConsoleServices) -> None:
        self._s = services

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        await self._show(req, resp, Filters.parse(_query_dict(req)))

    async def _show(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        f: Filters,
        *,
        error: str | None = None,
        status: int = 200,
    ) -> None:
        console: ConsoleRequest = req.context.console
        rows: list[dict[str, Any]] = []
        more = False
        if f.problems:
            error = error or " ".join(f.problems)
            status = 400
        else:
            tool = "recall" if f.searching else "list_memories"
            # list_memories takes no tags in the contract (count_memories does); its use
            # case filters by them, and the console may pass them (read tools only).
            extra = frozenset() if f.searching else frozenset({"tags"})
            payload = await self._s.tools.call(
                console.user_id, tool, f.arguments(), extra_arguments=extra
            )
            problem = failure(payload)
            if problem is not None:
                error = error or problem.message
                status = 400
            elif f.searching:
                rows = list(payload.get("matches", []))
                more = len(rows) >= f.limit and f.limit < MAX_SEARCH
            else:
                rows = list(payload.get("memories", []))
                more = len(rows) > PAGE
                rows = rows[:PAGE]
        tags = await self._s.tools.call(console.user_id, "list_tags", {"limit": 30})
        self._s.renderer.page(
            req,
            resp,
            "memories.html",
            title="Search results" if f.searching else "Your memories",
            status=status,
            notice=_counted_notice(req),
            filters=f,
            rows=rows,
            more=more,
            all_tags=tags.get("tags", []) if tags.get("ok") else [],
            selected=set(_ids(console)[0]) if req.method == "POST" else set(),
            error=error,
            back=urlencode([(k, v) for k, v in f.params().items() if v not in (None, "", False)]),
            operation_key=new_operation_key(),
            form=console.form if req.method == "POST" else {},
        )

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        console: ConsoleRequest = req.context.console
        back = {k: v for k, v in parse_qsl(console.value("back")) if k in FILTER_KEYS}
        f = Filters.parse(back)
        ids, bad = _ids(console)
        action = console.value("action")
        most = self._s.settings.max_batch_size
        if bad or not ids or len(ids) > most:
            message = "Select at least one memory." if not bad else "The selection was not valid."
            if len(ids) > most:
                # The batch tools' own limit, checked before any call is made.
                message = f"Select at most {most} memories at once."
            await self._show(req, resp, f, error=message, status=400)
            return
        if action == "forget":
            await self._forget(req, resp, f, ids)
        elif action in ("add-tags", "remove-tags"):
            await self._retag(req, resp, f, ids, adding=action == "add-tags")
        else:
            await self._show(req, resp, f, error="Choose what to do with them.", status=400)

    async def _forget(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        f: Filters,
        ids: list[int],
    ) -> None:
        console: ConsoleRequest = req.context.console
        reason = console.value("reason").strip()
        args: dict[str, Any] = {"ids": ids, **({"reason": reason} if reason else {})}
        payload = await self._s.tools.call(
            console.user_id, "forget_batch", args, key=_operation_key(console)
        )
        problem = failure(payload)
        if problem is not None:
            await self._show(req, resp, f, error=problem.message, status=400)
            return
        summary = payload.get("summary", {})
        self._s.renderer.redirect(
            resp,
            PATH,
            **f.params(),
            notice="bulk-forgotten",
            count=int(summary.get("deleted", 0)),
            already=int(summary.get("already_deleted", 0)) or None,
            failed=int(summary.get("errors", 0)) or None,
        )

    async def _retag(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        f: Filters,
        ids: list[int],
        *,
        adding: bool,
    ) -> None:
        console: ConsoleRequest = req.context.console
        typed = [t.strip() for t in console.value("bulk_tags").split(",") if t.strip()]
        try:
            wanted = normalize_tags(typed, field="bulk_tags")
        except MemoryServiceError:
            wanted = []
        if not wanted:
            error = "Enter one or more tags, separated by commas (letters, digits, hyphens)."
            await self._show(req, resp, f, error=error, status=400)
            return
        current = await asyncio.gather(
            *(self._s.tools.call(console.user_id, "get_memory", {"id": i}) for i in ids)
        )
        items: list[dict[str, Any]] = []
        failed = 0
        for payload in current:
            memory = payload.get("memory") if payload.get("ok") else None
            if not isinstance(memory, dict) or memory.get("deleted_at"):
                failed += 1
                continue
            tags = list(memory.get("tags") or [])
            if adding:
                new = tags + [t for t in wanted if t not in tags]
            else:
                new = [t for t in tags if t not in wanted]
            if new != tags:
                items.append({"id": memory["id"], "tags": new})
        updated = 0
        if items:
            payload = await self._s.tools.call(
                console.user_id,
                "update_memory_batch",
                {"items": items},
                key=_operation_key(console),
            )
            problem = failure(payload)
            if problem is not None:
                await self._show(req, resp, f, error=problem.message, status=400)
                return
            summary = payload.get("summary", {})
            updated = int(summary.get("updated", 0))
            failed += int(summary.get("errors", 0))
        self._s.renderer.redirect(
            resp,
            PATH,
            **f.params(),
            notice="bulk-tagged" if adding else "bulk-untagged",
            count=updated,
            failed=failed or None,
        )


def _ids(console: ConsoleRequest) -> tuple[list[int], bool]:
    """The selected ids (distinct, in order) and whether any value was not an id."""
    ids: dict[int, None] = {}
    bad = False
    for raw in console.values("ids"):
        value = positive_id(raw)
        if value is None:
            bad = True
        else:
            ids.setdefault(value, None)
    return list(ids), bad


def routes(services: ConsoleServices) -> list[tuple[str, object]]:
    return [(PATH, MemoryList(services))]


def _operation_key(console: ConsoleRequest) -> str | None:
    """The form's operation key: a resubmitted form repeats it, so its write is done once."""
    return console.value("operation") or None
