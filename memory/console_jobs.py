"""The console's background jobs and chat-import uploads, kept in PostgreSQL (thin use cases).

The console (``api/console/jobs.py``) runs a job's work in the web process
that started it and records its progress here, so any web process can show
it. A process that dies leaves its running rows behind: they stop getting
their heartbeat and read as failed with :data:`INTERRUPTED` once
:data:`STALE_AFTER_S` has passed without an update.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from storage import console_jobs as store
from storage.sealing.scope import Scope, sealing_as

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from storage.console_jobs import JobRow, UploadRow

#: A running job's process writes at least this often, progress or not.
HEARTBEAT_S = 30.0
#: A running row not updated for this long belongs to a process that is gone
#: (four missed heartbeats: a busy event loop or a slow commit is not a death).
STALE_AFTER_S = 120.0
INTERRUPTED = "Interrupted: the server restarted. Start it again."
#: How a job ended (what :func:`finish` records).
JobEnd = store.JobEnd


async def create(
    pool: AsyncConnectionPool,
    *,
    job_id: str,
    user_id: int,
    kind: str,
    subject: str | None = None,
    key: str | None = None,
    take_stale_key: bool = False,
) -> bool:
    """Store a new running job; False when another job of the user holds ``key``.

    With ``take_stale_key`` a holder whose process died is marked interrupted and
    gives the key up (a key held only while its job runs must not be held forever).
    """
    async with pool.connection() as conn:

        async def insert() -> bool:
            return await store.insert_job(
                conn, job_id=job_id, user_id=user_id, kind=kind, subject=subject, operation_key=key
            )

        if await insert():
            return True
        if key is None or not take_stale_key:
            return False
        freed = await store.fail_stale_holder(
            conn, user_id, key, stale_after_s=STALE_AFTER_S, message=INTERRUPTED
        )
        return freed and await insert()


async def get(pool: AsyncConnectionPool, user_id: int, job_id: str) -> JobRow | None:
    async with pool.connection() as conn:
        return await store.get_job(conn, user_id, job_id, stale_after_s=STALE_AFTER_S)


async def by_key(pool: AsyncConnectionPool, user_id: int, key: str) -> JobRow | None:
    async with pool.connection() as conn:
        return await store.job_by_key(conn, user_id, key, stale_after_s=STALE_AFTER_S)


async def newest_for_subject(
    pool: AsyncConnectionPool, user_id: int, subject: str, *, done_only: bool
) -> JobRow | None:
    async with pool.connection() as conn:
        return await store.newest_for_subject(
            conn, user_id, subject, done_only=done_only, stale_after_s=STALE_AFTER_S
        )


async def save_progress(
    pool: AsyncConnectionPool, job_id: str, *, done: int, total: int | None, message: str
) -> None:
    async with pool.connection() as conn:
        await store.save_progress(conn, job_id, done=done, total=total, message=message)


async def finish(pool: AsyncConnectionPool, job_id: str, end: JobEnd) -> None:
    async with pool.connection() as conn:
        await store.finish_job(conn, job_id, end)


async def prune(
    pool: AsyncConnectionPool, *, jobs_older_than_s: float, uploads_older_than_s: float
) -> tuple[int, int]:
    """Remove old finished jobs and expired uploads; how many of each."""
    async with pool.connection() as conn:
        jobs = await store.prune_jobs(conn, older_than_s=jobs_older_than_s)
        uploads = await store.prune_uploads(conn, older_than_s=uploads_older_than_s)
    return jobs, uploads


async def prune_uploads(pool: AsyncConnectionPool, *, older_than_s: float) -> int:
    """Remove uploads older than ``older_than_s``; how many."""
    async with pool.connection() as conn:
        return await store.prune_uploads(conn, older_than_s=older_than_s)


async def put_upload(
    pool: AsyncConnectionPool,
    *,
    upload_id: str,
    user_id: int,
    filename: str,
    export: dict[str, Any],
    scope: Scope | None = None,
) -> None:
    """Store an upload; sealed under ``scope``'s keys when it seals (``memory.call_keys``)."""
    with sealing_as(scope):
        async with pool.connection() as conn:
            await store.insert_upload(
                conn, upload_id=upload_id, user_id=user_id, filename=filename, export=export
            )


async def get_upload(
    pool: AsyncConnectionPool,
    user_id: int,
    upload_id: str,
    *,
    max_age_s: float,
    scope: Scope | None = None,
) -> UploadRow | None:
    """The user's upload; a sealed one opened with ``scope``'s keys (refused without)."""
    with sealing_as(scope):
        async with pool.connection() as conn:
            return await store.get_upload(conn, user_id, upload_id, max_age_s=max_age_s)


async def delete_upload(pool: AsyncConnectionPool, user_id: int, upload_id: str) -> None:
    async with pool.connection() as conn:
        await store.delete_upload(conn, user_id, upload_id)
