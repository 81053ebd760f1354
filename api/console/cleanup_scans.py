"""The clean-up page's scans: run in the background, shown from their stored result.

A scan (``find_near_duplicates`` or ``find_conflicts`` over the whole store)
takes seconds at 100k memories, far too long for a page view. It runs as a
console job (kind :data:`SCAN_KIND`) that calls the tool as the console (so
the audit log records it) and keeps the tool's payload as the job's result,
without the members' rows (ids, similarity, reason and sizes stay): those are
read again on every view anyway, and so no memory text is copied into the
jobs table, where a forgotten memory's text would outlive its forget. Beside
it, the store's change marker read just before the scan
(:func:`memory.scan_cache.change_marker`).

The page for a kind and threshold shows the newest finished scan of that
pair, with the first :data:`SHOWN_MEMBERS` members of each group read again,
all in one query: a member forgotten, or changed since the scan read the
store, leaves its group, and a group left with fewer than two members is not
shown. A larger group shows its first members only, and its actions act on
those: nothing the owner did not see is forgotten or replaced (at 100k
memories a low threshold makes groups of hundreds; the tool lists up to 200). A fresh scan starts in the
background (the old result still shown meanwhile) when the shown one is
older than :data:`RESCAN_AFTER_S` or the store changed since; with none yet,
a view starts one. One scan per user, kind and threshold runs at a time:
its operation key is held while it runs, so concurrent views start one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from api.console.jobs import Job
from api.console.services import ConsoleServices
from api.console.tools import failure
from memory.call_keys import call_scope
from memory.scan_cache import change_marker, current_members

SCAN_KIND = "Clean-up scan"
#: Members of a group shown (and acted on) at most.
SHOWN_MEMBERS = 10
#: Members of a group read again: the shown ones, and spares for those forgotten since.
_READ_MEMBERS = 2 * SHOWN_MEMBERS
#: A shown scan older than this is run again in the background.
RESCAN_AFTER_S = 3600
_SUBJECT = "cleanup"


def subject_of(kind: str, threshold: float) -> str:
    return f"{_SUBJECT}:{kind}:{threshold:.2f}"


def scan_page(subject: str | None) -> tuple[str, dict[str, str]] | None:
    """The clean-up page (path, query) a scan job's subject is for; None for other jobs."""
    parts = (subject or "").split(":")
    if len(parts) != 3 or parts[0] != _SUBJECT:
        return None
    return "/console/cleanup", {"kind": parts[1], "threshold": parts[2]}


class ScanFailed(Exception):
    """The tool refused or failed; ``public_message`` is what the page shows."""

    def __init__(self, public_message: str) -> None:
        super().__init__(public_message)
        self.public_message = public_message


@dataclass(frozen=True)
class ScanView:
    #: The shown scan's groups as the store is now (members re-read); none without a scan.
    groups: list[dict[str, Any]]
    #: When the shown scan read the store; None: no scan has finished yet.
    scanned_at: datetime | None
    #: A scan underway (started by this view or before), or None.
    running: Job | None
    #: Why the newest scan failed, when no later one finished; else None.
    failed: str | None


class Scans:
    def __init__(self, services: ConsoleServices) -> None:
        self._s = services

    async def view(self, user_id: int, kind: str, tool: str, threshold: float) -> ScanView:
        """What the page shows for ``kind`` at ``threshold``, starting a scan when one is due."""
        jobs = self._s.jobs
        subject = subject_of(kind, threshold)
        shown = await jobs.newest(user_id, subject, done_only=True)
        latest = await jobs.newest(user_id, subject)
        running = latest if latest is not None and latest.state == "running" else None
        failed = latest.message if latest is not None and latest.state == "failed" else None
        if shown is None:
            # A failed first scan waits for "Scan again": a view must not retry it forever.
            if running is None and failed is None:
                running = await self.start(user_id, kind, tool, threshold)
            return ScanView([], None, running, failed)
        # A rescan that failed after the shown one waits for "Scan again" too: otherwise
        # every view (and the page's reload when a scan ends) would start it again.
        if running is None and failed is None and await self._outdated(user_id, shown):
            running = await self.start(user_id, kind, tool, threshold)
        groups = await self._current(user_id, shown)
        return ScanView(groups, shown.created_at, running, failed)

    async def start(self, user_id: int, kind: str, tool: str, threshold: float) -> Job:
        """A scan of ``kind`` at ``threshold``, or the one already running."""
        return await self._s.jobs.start(
            user_id,
            SCAN_KIND,
            self._work(user_id, tool, threshold),
            key=f"scan:{kind}:{threshold:.2f}",
            subject=subject_of(kind, threshold),
            exclusive=True,
        )

    def _work(self, user_id: int, tool: str, threshold: float) -> Any:
        services = self._s

        async def work(job: Job) -> None:
            # Read before the scan: a change while it runs makes the next view scan again.
            marker = await change_marker(services.pool, user_id)
            job.progress(0, 1, "Comparing every memory with its nearest neighbours.")
            payload = await services.tools.call(user_id, tool, {"threshold": threshold})
            problem = failure(payload)
            if problem is not None:
                raise ScanFailed(f"The scan failed: {problem.message}")
            job.result = {"tool": _without_rows(payload), "store": marker}
            found = len(payload.get("groups", []))
            job.progress(1, 1, f"{found} group{'' if found == 1 else 's'} found.")

        return work

    async def _outdated(self, user_id: int, shown: Job) -> bool:
        if shown.created_at is None or _age_s(shown.created_at) > RESCAN_AFTER_S:
            return True
        return await change_marker(self._s.pool, user_id) != shown.result.get("store")

    async def _current(self, user_id: int, shown: Job) -> list[dict[str, Any]]:
        """The shown scan's groups, each member as it is now; changed ones left out."""
        groups = shown.result.get("tool", {}).get("groups", [])
        ids = sorted({mid for group in groups for mid in group.get("ids", [])[:_READ_MEMBERS]})
        # The owner's keys: the members are read again, and sealed rows open only with them.
        scope = await call_scope(self._s.runtime.deps, user_id)
        fresh = await current_members(self._s.pool, user_id, ids, scope)
        scanned = parse_time((shown.result.get("store") or {}).get("updated_at"))
        current = []
        for group in groups:
            read = group.get("ids", [])[:_READ_MEMBERS]
            alive = [fresh[m] for m in read if m in fresh and _unchanged(fresh[m], scanned)]
            if len(alive) < 2:
                continue
            # As large as the scan found it, less the members gone since among those read.
            size = max(int(group.get("size") or 0), len(group.get("ids", []))) - (
                len(read) - len(alive)
            )
            members = alive[:SHOWN_MEMBERS]
            current.append(
                {
                    **group,
                    "ids": [m["id"] for m in members],
                    "memories": members,
                    "size": size,
                    "truncated": size > len(members),
                }
            )
        return current


def _without_rows(payload: dict[str, Any]) -> dict[str, Any]:
    """The tool's payload without its members' rows (the page reads them as they are now)."""
    groups = [{k: v for k, v in g.items() if k != "memories"} for g in payload.get("groups", [])]
    return {**payload, "groups": groups}


def _unchanged(member: dict[str, Any], scanned: datetime | None) -> bool:
    """Not edited after the scan read the store (confirm does not count: settled() reads it)."""
    updated = parse_time(member.get("updated_at"))
    return scanned is None or updated is None or updated <= scanned


def parse_time(value: Any) -> datetime | None:
    """A row shape's timestamp (ISO 8601, "Z" for UTC); None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _age_s(at: datetime) -> float:
    return (datetime.now(UTC) - at).total_seconds()


def ago(at: datetime) -> str:
    """``at`` as "just now", "3 minutes ago", "2 hours ago", "5 days ago"."""
    seconds = max(0, int(_age_s(at)))
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = seconds // size
            return f"{n} {unit}{'' if n == 1 else 's'} ago"
    return "just now"
