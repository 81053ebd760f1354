"""``/console/cleanup``: near-duplicate and conflicting memories, side by side, resolved in a click.

The groups are the ``find_near_duplicates`` and ``find_conflicts`` tools'
(``?kind=duplicates|conflicts&threshold=0.85``; the tools' defaults when not
given), from the last background scan of that kind and threshold with its
members read again (:mod:`api.console.cleanup_scans`): the page answers in
milliseconds whatever the store's size. "Scan again" (``action=scan``)
starts a fresh scan. Each group offers three resolutions, each a POST of
tool calls:

- **Keep this one**: ``forget`` every other member, with a recorded reason and
  ``replaced_by_id`` = the kept memory (``forget_batch`` has no replacement field);
- **Store a corrected fact**: ``remember`` the owner's text with ``supersedes`` =
  the group (each member is retired in the same transaction as the insert);
- **This one is right**: ``confirm`` it. The group stays in the tools' answer
  (both memories are still active), so the page hides a group once one member
  was confirmed after every other was last stated, until one of them changes
  (``?show=all`` shows it).

Before changing anything an action reads every member with ``get_memory``: an
id that is not the owner's is a 404, exactly like an unknown one, and nothing
is changed. ``Keep this one`` also dry-runs its forgets first, so a refusal
(a locked memory) changes nothing either.
"""

from __future__ import annotations

from typing import Any

import falcon.asgi

from api.console.cleanup_scans import Scans, ago, parse_time
from api.console.forms import positive_id
from api.console.guard import ConsoleRequest, new_operation_key
from api.console.render import NOTICES
from api.console.services import ConsoleServices
from api.console.tools import ToolFailure, failure

PATH = "/console/cleanup"
KINDS = {
    "duplicates": ("find_near_duplicates", 0.92, "Near-duplicates"),
    "conflicts": ("find_conflicts", 0.80, "Possible conflicts"),
}
MIN_THRESHOLD, MAX_THRESHOLD = 0.5, 1.0
#: Tool errors that are the server's trouble, not the form's.
_UNAVAILABLE = frozenset({"DATABASE_ERROR", "EMBEDDING_ERROR", "INTERNAL_ERROR", "UNAVAILABLE"})

NOTICES.update(
    {
        "cleanup-kept": "Kept the memory you chose; the others in its group are forgotten.",
        "cleanup-corrected": "Stored the corrected fact; the memories it replaces are retired.",
        "cleanup-confirmed": (
            "Confirmed. The group is hidden until one of its memories changes "
            "(show all groups to see it)."
        ),
        "cleanup-scanning": "Scanning again; the groups below are from the last scan until it ends.",
    }
)


class _Refused(Exception):
    """An action that cannot go on: an error page (404) or the page with an alert."""

    def __init__(self, status: int, message: str, *, page: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        #: True: the clean-up page with the alert; False: the error page.
        self.page = page


def _threshold(raw: str | None, default: float) -> float:
    """The asked threshold, to the slider's step (a scan is kept per threshold shown)."""
    try:
        value = float(raw) if raw not in (None, "") else default
    except ValueError:
        return default
    return round(value, 2) if value == value else default  # NaN


def _kind(raw: str | None) -> str:
    return raw if raw in KINDS else "duplicates"


def settled(group: dict[str, Any]) -> bool:
    """One member was confirmed after it was stored, later than every other was stated.

    An insert's own ``last_confirmed_at`` is its ``created_at`` (one transaction's
    ``now()``), so only a later ``confirm`` counts.
    """
    members = group.get("memories", [])
    for chosen in members:
        confirmed = parse_time(chosen.get("last_confirmed_at"))
        created = parse_time(chosen.get("created_at"))
        if confirmed is None or created is None or confirmed <= created:
            continue
        others = [m for m in members if m is not chosen]
        stamps = [
            parse_time(m.get(f))
            for m in others
            for f in ("created_at", "updated_at", "last_confirmed_at")
        ]
        if others and all(s is None or s < confirmed for s in stamps):
            return True
    return False


class CleanupPage:
    def __init__(self, services: ConsoleServices) -> None:
        self._s = services
        self._scans = Scans(services)

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        kind = _kind(req.get_param("kind"))
        threshold = _threshold(req.get_param("threshold"), KINDS[kind][1])
        await self._show(req, resp, kind, threshold, show_all=req.get_param("show") == "all")

    async def _show(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        kind: str,
        threshold: float,
        *,
        show_all: bool = False,
        error: str | None = None,
        error_group: tuple[int, ...] = (),
        draft: str = "",
        status: int = 200,
    ) -> None:
        console: ConsoleRequest = req.context.console
        tool, default, label = KINDS[kind]
        groups: list[dict[str, Any]] = []
        hidden = 0
        scan_error = None
        scan: dict[str, Any] = {"scanned": None, "running": None}
        if MIN_THRESHOLD <= threshold <= MAX_THRESHOLD:
            view = await self._scans.view(console.user_id, kind, tool, threshold)
            scan_error = view.failed
            if view.scanned_at is not None:
                scan["scanned"] = ago(view.scanned_at)
            if view.running is not None:
                scan["running"] = f"/console/jobs/{view.running.id}"
            for group in view.groups:
                if not show_all and settled(group):
                    hidden += 1
                    continue
                groups.append(_view(group))
        else:
            scan_error = (
                f"The threshold must be between {MIN_THRESHOLD} and {MAX_THRESHOLD}: "
                f"showing nothing for {threshold}."
            )
            status = max(status, 400)
        if error_group and list(error_group) not in [g["ids"] for g in groups]:
            error_group = ()  # the group is gone or changed: the alert goes above the groups
        self._s.renderer.page(
            req,
            resp,
            "cleanup.html",
            title="Clean-up",
            status=status,
            kind=kind,
            kinds=[(k, v[2]) for k, v in KINDS.items()],
            kind_label=label,
            threshold=f"{threshold:.2f}",
            default_threshold=f"{default:.2f}",
            groups=groups,
            hidden=hidden,
            show_all=show_all,
            scan_error=scan_error,
            error=error,
            error_group=list(error_group),
            draft=draft,
            new_key=new_operation_key,
            scan=scan,
        )

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        console: ConsoleRequest = req.context.console
        kind = _kind(console.value("kind"))
        threshold = _threshold(console.value("threshold"), KINDS[kind][1])
        action, chosen = console.value("action"), console.value("id")
        if console.value("choose"):
            # A group's form: the button pressed names the action and the memory.
            action, _, chosen = console.value("choose").partition(":")
        if action == "scan":
            if MIN_THRESHOLD <= threshold <= MAX_THRESHOLD:
                await self._scans.start(console.user_id, kind, KINDS[kind][0], threshold)
            self._s.renderer.redirect(
                resp, PATH, notice="cleanup-scanning", kind=kind, threshold=f"{threshold:.2f}"
            )
            return
        try:
            ids = _ids(console.values("ids"))
            if action == "keep":
                notice = await self._keep(console, ids, _chosen(chosen, ids), kind)
            elif action == "correct":
                notice = await self._correct(console, ids)
            elif action == "confirm":
                notice = await self._confirm(console, ids, _chosen(chosen, ids))
            else:
                raise _Refused(400, "Choose one of the actions on the page.", page=False)
        except _Refused as ex:
            if not ex.page:
                title = "Not found" if ex.status == 404 else "The action could not be done"
                self._s.renderer.error(req, resp, ex.status, title, ex.message)
                return
            await self._show(
                req,
                resp,
                kind,
                threshold,
                error=ex.message,
                error_group=tuple(_ids(console.values("ids"), strict=False)),
                draft=console.value("text"),
                status=ex.status,
            )
            return
        self._s.renderer.redirect(
            resp, PATH, notice=notice, kind=kind, threshold=f"{threshold:.2f}"
        )

    async def _call(
        self, console: ConsoleRequest, tool: str, arguments: dict[str, Any], key: str | None
    ) -> dict[str, Any]:
        payload = await self._s.tools.call(console.user_id, tool, arguments, key=key)
        problem = failure(payload)
        if problem is not None:
            raise _refusal(problem)
        return payload

    async def _members(self, console: ConsoleRequest, ids: list[int]) -> list[dict[str, Any]]:
        """Every member as ``get_memory`` has it; a 404 for any id not the owner's."""
        members = []
        for mid in ids:
            payload = await self._call(console, "get_memory", {"id": mid}, None)
            members.append(payload["memory"])
        return members

    async def _keep(self, console: ConsoleRequest, ids: list[int], chosen: int, kind: str) -> str:
        await self._members(console, ids)
        why = "duplicate of" if kind == "duplicates" else "conflicted with"
        reason = f"Clean-up: {why} #{chosen}, which the owner kept."
        others = [i for i in ids if i != chosen]
        key = console.value("operation") or None
        # A dry run of every forget first: a refusal (a locked member) changes nothing.
        for mid in others:
            arguments = {"id": mid, "reason": reason, "replaced_by_id": chosen, "dry_run": True}
            await self._call(console, "forget", arguments, None)
        done: list[int] = []
        for mid in others:
            arguments = {"id": mid, "reason": reason, "replaced_by_id": chosen}
            try:
                await self._call(console, "forget", arguments, key)
            except _Refused as ex:
                if not done:
                    raise
                # Changed since the dry run: say what did happen, not "nothing was changed".
                forgotten = ", ".join(f"#{i}" for i in done)
                detail = ex.message.removeprefix("Nothing was changed: ")
                raise _Refused(ex.status, f"Forgot {forgotten}, then stopped: {detail}") from ex
            done.append(mid)
        return "cleanup-kept"

    async def _correct(self, console: ConsoleRequest, ids: list[int]) -> str:
        text = console.value("text").strip()
        if not text:
            raise _Refused(400, "Write the corrected fact in the box first; nothing was changed.")
        members = await self._members(console, ids)
        tags = sorted({t for m in members for t in m.get("tags") or []})
        arguments: dict[str, Any] = {"text": text, "supersedes": ids, "capture_mode": "explicit"}
        if tags:
            arguments["tags"] = tags
        await self._call(console, "remember", arguments, console.value("operation") or None)
        return "cleanup-corrected"

    async def _confirm(self, console: ConsoleRequest, ids: list[int], chosen: int) -> str:
        await self._call(console, "confirm", {"id": chosen}, console.value("operation") or None)
        return "cleanup-confirmed"


def _refusal(problem: ToolFailure) -> _Refused:
    if problem.code == "NOT_FOUND":
        return _Refused(404, "There is no such memory.", page=False)
    status = 503 if problem.code in _UNAVAILABLE else 400
    return _Refused(status, f"Nothing was changed: {problem.message}")


def _ids(raw: list[str], *, strict: bool = True) -> list[int]:
    """The group's ids, in order, each once; at least two (a group) when ``strict``."""
    ids: list[int] = []
    for value in raw:
        mid = positive_id(value)
        if mid is None:
            if strict:
                raise _Refused(400, "The form named no such memory.", page=False)
            continue
        if mid not in ids:
            ids.append(mid)
    if strict and not 2 <= len(ids) <= 500:
        raise _Refused(400, "A group has at least two memories.", page=False)
    return ids


def _chosen(raw: str, ids: list[int]) -> int:
    chosen = positive_id(raw)
    if chosen is None or chosen not in ids:
        raise _Refused(400, "Choose one memory of the group.", page=False)
    return chosen


def _view(group: dict[str, Any]) -> dict[str, Any]:
    """A group as the template shows it."""
    return {
        "ids": list(group.get("ids", [])),
        "max_similarity": group.get("max_similarity"),
        "reason": group.get("reason"),
        "truncated": bool(group.get("truncated")),
        "size": group.get("size", len(group.get("ids", []))),
        "memories": list(group.get("memories", [])),
    }


def routes(services: ConsoleServices) -> list[tuple[str, object]]:
    return [(PATH, CleanupPage(services))]
