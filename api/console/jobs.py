"""Background jobs the console starts (imports, clean-up scans), and their progress for the page.

A job is a row in PostgreSQL (:mod:`memory.console_jobs`), so every web
process (``WEB_CONCURRENCY``) finds it: the progress page, a confirm or a
double submit may land on another process than the one that started it.
The work itself runs as an asyncio task in the process that started it,
which writes the job's progress to its row at most every
:data:`FLUSH_EVERY_S` (and at once on every change of state), and touches
it at least every :data:`~memory.console_jobs.HEARTBEAT_S` without
progress. A process that dies leaves a row that reads as failed
("Interrupted: the server restarted. Start it again.") once the heartbeat
window has passed; the work is idempotent (imports skip what is stored,
scans only read), so the owner starts it again.

Each job belongs to one user; another user's job id is 404 like any
unknown id. A job may carry an operation key, unique per user: a form's
key (a double submit finds the first job and starts nothing) or, with
``exclusive``, a key held only while the job runs (one clean-up scan of a
kind and threshold at a time).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psycopg

from memory import console_jobs as rows
from storage.errors import StorageError

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from storage.console_jobs import JobRow

logger = logging.getLogger("ownsona.api.console.jobs")

#: A running job's progress reaches its row at most this often.
FLUSH_EVERY_S = 0.5
#: Finished jobs are removed after this long (the newest scan of each kind stays).
KEEP_FINISHED_S = 24 * 3600
#: A chat-import upload waits this long for its confirmation.
KEEP_UPLOADS_S = 3600
#: How often a process prunes, on the next start after this many seconds.
PRUNE_EVERY_S = 3600
_STOPPED = "Stopped: the server shut down. Start it again."


@dataclass
class Job:
    id: str
    user_id: int
    kind: str
    state: str = "running"  # running | done | failed
    done: int = 0
    #: Units of work in all, once known.
    total: int | None = None
    #: What the page shows under the bar: counts, never memory text.
    message: str = ""
    #: What the job found or did, for its result page.
    result: dict[str, Any] = field(default_factory=dict)
    #: What the job is about (a scan: its kind and threshold), or None.
    subject: str | None = None
    #: When it started and finished (the database's clock); None while not known here.
    created_at: Any = None
    finished_at: Any = None
    #: From :meth:`Jobs.start`: True when this call started it, False when an earlier
    #: job holds the operation key (the caller shows that one and starts nothing).
    started: bool = True
    #: Set by progress; the job's writer saves it (throttled).
    _changed: asyncio.Event | None = field(default=None, repr=False, compare=False)
    #: Its operation key is given up when it ends (``exclusive``).
    _release_key: bool = field(default=False, repr=False, compare=False)

    def progress(self, done: int, total: int | None = None, message: str | None = None) -> None:
        self.done = done
        if total is not None:
            self.total = total
        if message is not None:
            self.message = message
        if self._changed is not None:
            self._changed.set()

    def to_json(self) -> dict[str, Any]:
        percent = None
        if self.total:
            percent = min(100, round(100 * self.done / self.total))
        elif self.state == "done":
            percent = 100
        return {
            "id": self.id,
            "kind": self.kind,
            "state": self.state,
            "done": self.done,
            "total": self.total,
            "percent": percent,
            "message": self.message,
            "result": self.result,
        }

    @classmethod
    def from_row(cls, row: JobRow) -> Job:
        state, message = row.state, row.message
        if row.stale:
            state, message = "failed", rows.INTERRUPTED
        return cls(
            id=row.id,
            user_id=row.user_id,
            kind=row.kind,
            state=state,
            done=row.done,
            total=row.total,
            message=message,
            result=dict(row.result),
            subject=row.subject,
            created_at=row.created_at,
            finished_at=row.finished_at,
            started=False,
        )


JobWork = Callable[[Job], Awaitable[None]]


async def _first(*events: asyncio.Event, timeout_s: float) -> None:
    """Until one of ``events`` is set, or ``timeout_s`` has passed."""
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


class Jobs:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool
        self._tasks: dict[str, asyncio.Task[None]] = {}
        #: The jobs of those tasks, for close() to record one cancelled before it ran.
        self._running: dict[str, Job] = {}
        self._next_prune = 0.0

    async def start(
        self,
        user_id: int,
        kind: str,
        work: JobWork,
        *,
        key: str | None = None,
        subject: str | None = None,
        exclusive: bool = False,
    ) -> Job:
        """Run ``work(job)`` in the background; it reports through ``job.progress``.

        With ``key`` taken by an earlier job of the user, that job is returned
        (``started`` False) and ``work`` is not run. ``exclusive``: the key is
        given up when the job ends, and taken from a holder whose process died.
        """
        await self._prune()
        job = Job(id=secrets.token_urlsafe(12), user_id=user_id, kind=kind, subject=subject)
        created = await rows.create(
            self._pool,
            job_id=job.id,
            user_id=user_id,
            kind=kind,
            subject=subject,
            key=key,
            take_stale_key=exclusive,
        )
        if not created:
            assert key is not None
            earlier = await self.find_by_key(user_id, key)
            if earlier is not None:
                return earlier
            # The holder ended between the insert and the read: its key is free again.
            return await self.start(
                user_id, kind, work, key=key, subject=subject, exclusive=exclusive
            )
        job._changed, job._release_key = asyncio.Event(), exclusive
        task = asyncio.get_running_loop().create_task(self._run(job, work))
        self._tasks[job.id] = task
        self._running[job.id] = job

        def ended(_: object) -> None:
            self._tasks.pop(job.id, None)
            self._running.pop(job.id, None)

        task.add_done_callback(ended)
        return job

    async def find(self, user_id: int, job_id: str) -> Job | None:
        """The user's job, from whichever process runs it; None for another user's."""
        row = await rows.get(self._pool, user_id, job_id)
        return None if row is None else Job.from_row(row)

    async def find_by_key(self, user_id: int, key: str) -> Job | None:
        row = await rows.by_key(self._pool, user_id, key)
        return None if row is None else Job.from_row(row)

    async def newest(self, user_id: int, subject: str, *, done_only: bool = False) -> Job | None:
        """The user's most recently started job about ``subject`` (with ``done_only``: of
        those that finished well)."""
        row = await rows.newest_for_subject(self._pool, user_id, subject, done_only=done_only)
        return None if row is None else Job.from_row(row)

    async def wait(self, job: Job) -> None:
        """Until ``job`` has finished, if it runs in this process (tests, a command's wait)."""
        task = self._tasks.get(job.id)
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    async def wait_all(self) -> None:
        """Until every job running in this process has finished (tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def close(self) -> None:
        """Stop this process's jobs; each records that the server shut down."""
        tasks, jobs = list(self._tasks.values()), list(self._running.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for job in jobs:
            if job.state == "running":  # cancelled before its task ever ran
                job.state, job.message = "failed", _STOPPED
                await self._finish(job)

    async def _run(self, job: Job, work: JobWork) -> None:
        stop = asyncio.Event()
        writer = asyncio.get_running_loop().create_task(self._write_progress(job, stop))
        try:
            await work(job)
            job.state = "done"
        except asyncio.CancelledError:
            job.state, job.message = "failed", _STOPPED
            raise
        except Exception as ex:
            logger.error("console job %s (%s) failed", job.id, job.kind, exc_info=ex)
            job.state = "failed"
            job.message = getattr(ex, "public_message", None) or "The job failed; see the log."
        finally:
            # Told to stop, not cancelled: Python 3.11's wait_for can swallow a cancel that
            # meets a wake-up (the last progress), and a writer that missed it never ends.
            stop.set()
            await asyncio.gather(writer, return_exceptions=True)
            await self._finish(job)

    async def _write_progress(self, job: Job, stop: asyncio.Event) -> None:
        """Save ``job``'s progress when it changes (throttled), and a heartbeat when it does not."""
        changed = job._changed
        assert changed is not None
        while not stop.is_set():
            await _first(changed, stop, timeout_s=rows.HEARTBEAT_S)
            if stop.is_set():
                return  # the end is written by _finish, with everything
            changed.clear()
            try:
                await rows.save_progress(
                    self._pool, job.id, done=job.done, total=job.total, message=job.message
                )
            except (psycopg.Error, StorageError) as ex:
                # The next change or heartbeat tries again; a row left behind reads as interrupted.
                logger.warning("console job %s: progress not saved: %s", job.id, type(ex).__name__)
            await _first(stop, timeout_s=FLUSH_EVERY_S)  # the throttle; the end cuts it short

    async def _finish(self, job: Job) -> None:
        try:
            # Shielded: a job stopped by close() still records how it ended.
            await asyncio.shield(
                rows.finish(
                    self._pool,
                    job.id,
                    rows.JobEnd(
                        state=job.state,
                        done=job.done,
                        total=job.total,
                        message=job.message,
                        result=job.result,
                        release_key=job._release_key,
                    ),
                )
            )
        except (psycopg.Error, StorageError) as ex:
            logger.error("console job %s: its end was not saved: %s", job.id, type(ex).__name__)

    async def _prune(self) -> None:
        """Old finished jobs and expired uploads go, once an hour, on some job's start."""
        if time.monotonic() < self._next_prune:
            return
        self._next_prune = time.monotonic() + PRUNE_EVERY_S
        try:
            jobs, uploads = await rows.prune(
                self._pool,
                jobs_older_than_s=KEEP_FINISHED_S,
                uploads_older_than_s=KEEP_UPLOADS_S,
            )
        except (psycopg.Error, StorageError) as ex:
            logger.warning("console jobs: prune failed: %s", type(ex).__name__)
            return
        if jobs or uploads:
            logger.info("console jobs: pruned %d jobs and %d uploads", jobs, uploads)
