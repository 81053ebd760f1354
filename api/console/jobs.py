"""Background jobs the console starts (an import), and their progress for the page.

A job runs as an asyncio task in the web process; the page polls
``/console/jobs/{id}`` (JSON for the script, HTML with a refresh without it).
Jobs are kept in memory: a restart loses a running job's progress, and the
work it does is idempotent (imports skip what is already stored), so the
owner starts it again. Each job belongs to one user; another user's job id
is 404 like any unknown id.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("ownsona.api.console.jobs")

#: Finished jobs are forgotten after this many seconds.
KEEP_FINISHED_S = 3600
_MAX_JOBS = 1000


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
    finished_at: float | None = None

    def progress(self, done: int, total: int | None = None, message: str | None = None) -> None:
        self.done = done
        if total is not None:
            self.total = total
        if message is not None:
            self.message = message

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


JobWork = Callable[[Job], Awaitable[None]]


class Jobs:
    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, user_id: int, kind: str, work: JobWork) -> Job:
        """Run ``work(job)`` in the background; it reports through ``job.progress``."""
        self._prune()
        job = Job(id=secrets.token_urlsafe(12), user_id=user_id, kind=kind)
        self._jobs[job.id] = job
        task = asyncio.get_running_loop().create_task(self._run(job, work))
        self._tasks[job.id] = task
        task.add_done_callback(lambda _: self._tasks.pop(job.id, None))
        return job

    def find(self, user_id: int, job_id: str) -> Job | None:
        job = self._jobs.get(job_id)
        return job if job is not None and job.user_id == user_id else None

    async def wait(self, job: Job) -> None:
        """Until ``job`` has finished (tests, and a command's own wait)."""
        task = self._tasks.get(job.id)
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    async def wait_all(self) -> None:
        """Until every running job has finished (tests)."""
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self, job: Job, work: JobWork) -> None:
        try:
            await work(job)
            job.state = "done"
        except asyncio.CancelledError:
            job.state, job.message = "failed", "Stopped: the server shut down. Start it again."
            raise
        except Exception as ex:
            logger.error("console job %s (%s) failed", job.id, job.kind, exc_info=ex)
            job.state = "failed"
            job.message = getattr(ex, "public_message", None) or "The job failed; see the log."
        finally:
            job.finished_at = time.monotonic()

    def _prune(self) -> None:
        now = time.monotonic()
        for job_id, job in list(self._jobs.items()):
            if job.finished_at is not None and now - job.finished_at > KEEP_FINISHED_S:
                del self._jobs[job_id]
        if len(self._jobs) >= _MAX_JOBS:
            for job_id, job in list(self._jobs.items()):
                if job.state != "running":
                    del self._jobs[job_id]
