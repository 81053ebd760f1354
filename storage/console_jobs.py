"""SQL of the console's background jobs and of the chat-import uploads awaiting confirmation.

Every function takes a connection: the caller owns the transaction. Every
read is scoped by ``user_id``; the writes of a running job go by its id
(the process that runs it made the row). A running row whose process died
stops being updated: reads report it with ``stale`` true once its
``updated_at`` is older than the caller's heartbeat window, measured by the
database's clock (one clock for every web process).

An upload is sealed at rest when the call seals (migration 0025): ``filename`` ''
and ``export`` ``{}``, the values in ``filename_sealed`` and ``export_sealed`` bound
to (user, upload id, column) (``storage.sealed_values``). A job's columns carry no
user text (scan kinds and thresholds, counts, ids) and stay plain.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from .sealed_values import open_named_json, open_named_text, seal_named_json, seal_named_text


@dataclass(frozen=True)
class JobRow:
    id: str
    user_id: int
    kind: str
    subject: str | None
    state: str
    done: int
    total: int | None
    message: str
    result: dict[str, Any]
    operation_key: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    #: Running, but not updated within the heartbeat window: its process is gone.
    stale: bool


#: A :class:`JobRow`'s columns; ``stale`` reads the heartbeat window, its one parameter.
_COLUMNS = sql.SQL(
    "id, user_id, kind, subject, state, done, total, message, result, operation_key,"
    " created_at, updated_at, finished_at,"
    " (state = 'running' AND updated_at < now() - make_interval(secs => %s)) AS stale"
)


async def _one_job(
    conn: AsyncConnection,
    condition: sql.Composable,
    params: tuple[Any, ...],
    *,
    stale_after_s: float,
) -> JobRow | None:
    """The job row ``condition`` (over ``params``) selects first, with its staleness."""
    cur = conn.cursor(row_factory=class_row(JobRow))
    await cur.execute(
        sql.SQL("SELECT {} FROM console_jobs WHERE {}").format(_COLUMNS, condition),
        (stale_after_s, *params),
    )
    return await cur.fetchone()


async def insert_job(
    conn: AsyncConnection,
    *,
    job_id: str,
    user_id: int,
    kind: str,
    subject: str | None,
    operation_key: str | None,
) -> bool:
    """A new running row; False (nothing stored) when the user's ``operation_key`` is taken."""
    cur = await conn.execute(
        "INSERT INTO console_jobs (id, user_id, kind, subject, operation_key)"
        " VALUES (%s, %s, %s, %s, %s)"
        " ON CONFLICT (user_id, operation_key) WHERE operation_key IS NOT NULL DO NOTHING"
        " RETURNING id",
        (job_id, user_id, kind, subject, operation_key),
    )
    return await cur.fetchone() is not None


async def get_job(
    conn: AsyncConnection, user_id: int, job_id: str, *, stale_after_s: float
) -> JobRow | None:
    return await _one_job(
        conn,
        sql.SQL("id = %s AND user_id = %s"),
        (job_id, user_id),
        stale_after_s=stale_after_s,
    )


async def job_by_key(
    conn: AsyncConnection, user_id: int, operation_key: str, *, stale_after_s: float
) -> JobRow | None:
    return await _one_job(
        conn,
        sql.SQL("user_id = %s AND operation_key = %s"),
        (user_id, operation_key),
        stale_after_s=stale_after_s,
    )


async def newest_for_subject(
    conn: AsyncConnection, user_id: int, subject: str, *, done_only: bool, stale_after_s: float
) -> JobRow | None:
    """The user's most recently started job about ``subject``; with ``done_only``, of those
    that finished well."""
    state = sql.SQL("AND state = 'done'" if done_only else "")
    return await _one_job(
        conn,
        sql.SQL("user_id = %s AND subject = %s {} ORDER BY created_at DESC LIMIT 1").format(state),
        (user_id, subject),
        stale_after_s=stale_after_s,
    )


async def save_progress(
    conn: AsyncConnection, job_id: str, *, done: int, total: int | None, message: str
) -> None:
    """A running job's progress; also its heartbeat (``updated_at``)."""
    await conn.execute(
        "UPDATE console_jobs SET done = %s, total = %s, message = %s, updated_at = now()"
        " WHERE id = %s AND state = 'running'",
        (done, total, message, job_id),
    )


@dataclass(frozen=True)
class JobEnd:
    """How a job ended: its final state, counts, message and result."""

    state: str
    done: int
    total: int | None
    message: str
    result: dict[str, Any]
    #: Free the job's operation key for the next job.
    release_key: bool


async def finish_job(conn: AsyncConnection, job_id: str, end: JobEnd) -> None:
    """The job's end; with ``end.release_key`` its operation key is free for the next one."""
    await conn.execute(
        "UPDATE console_jobs SET state = %s, done = %s, total = %s, message = %s, result = %s,"
        " updated_at = now(), finished_at = now(),"
        " operation_key = CASE WHEN %s THEN NULL ELSE operation_key END"
        # A job another process already declared dead (its heartbeat stalled) stays ended.
        " WHERE id = %s AND state = 'running'",
        (end.state, end.done, end.total, end.message, Jsonb(end.result), end.release_key, job_id),
    )


async def fail_stale_holder(
    conn: AsyncConnection, user_id: int, operation_key: str, *, stale_after_s: float, message: str
) -> bool:
    """End a dead process's running job that still holds ``operation_key``, freeing the key."""
    cur = await conn.execute(
        "UPDATE console_jobs SET state = 'failed', message = %s, finished_at = now(),"
        " operation_key = NULL"
        " WHERE user_id = %s AND operation_key = %s AND state = 'running'"
        " AND updated_at < now() - make_interval(secs => %s) RETURNING id",
        (message, user_id, operation_key, stale_after_s),
    )
    return await cur.fetchone() is not None


async def prune_jobs(conn: AsyncConnection, *, older_than_s: float) -> int:
    """Remove jobs finished (or abandoned) longer ago than ``older_than_s``.

    The newest finished job of each subject stays, however old: the clean-up page
    shows the last scan's result until a new one replaces it.
    """
    cur = await conn.execute(
        "DELETE FROM console_jobs j"
        " WHERE coalesce(j.finished_at, j.updated_at) < now() - make_interval(secs => %s)"
        " AND (j.subject IS NULL OR j.state <> 'done' OR EXISTS ("
        "   SELECT 1 FROM console_jobs n WHERE n.user_id = j.user_id AND n.subject = j.subject"
        "   AND n.state = 'done' AND n.created_at > j.created_at))",
        (older_than_s,),
    )
    return cur.rowcount


# --- chat-import uploads -------------------------------------------------------------


@dataclass(frozen=True)
class UploadRow:
    id: str
    user_id: int
    filename: str
    export: dict[str, Any]
    created_at: datetime


async def insert_upload(
    conn: AsyncConnection, *, upload_id: str, user_id: int, filename: str, export: dict[str, Any]
) -> None:
    filename_sealed = seal_named_text(user_id, upload_id, "filename", filename)
    export_sealed = seal_named_json(user_id, upload_id, "export", export)
    await conn.execute(
        "INSERT INTO console_uploads (id, user_id, filename, export, filename_sealed,"
        " export_sealed) VALUES (%s, %s, %s, %s, %s, %s)",
        (
            upload_id,
            user_id,
            "" if filename_sealed is not None else filename,
            Jsonb({} if export_sealed is not None else export),
            filename_sealed,
            export_sealed,
        ),
    )


async def get_upload(
    conn: AsyncConnection, user_id: int, upload_id: str, *, max_age_s: float
) -> UploadRow | None:
    """The user's upload, unless older than ``max_age_s``; a sealed one opened."""
    cur = await conn.execute(
        "SELECT id, filename, export, created_at, filename_sealed, export_sealed"
        " FROM console_uploads"
        " WHERE id = %s AND user_id = %s AND created_at > now() - make_interval(secs => %s)",
        (upload_id, user_id, max_age_s),
    )
    row = await cur.fetchone()
    if row is None:
        return None
    row_id, filename, export, created_at, filename_sealed, export_sealed = row
    return UploadRow(
        id=row_id,
        user_id=user_id,
        filename=open_named_text(user_id, row_id, "filename", filename, filename_sealed),
        export=open_named_json(user_id, row_id, "export", export, export_sealed),
        created_at=created_at,
    )


async def delete_upload(conn: AsyncConnection, user_id: int, upload_id: str) -> None:
    await conn.execute(
        "DELETE FROM console_uploads WHERE id = %s AND user_id = %s", (upload_id, user_id)
    )


async def prune_uploads(conn: AsyncConnection, *, older_than_s: float) -> int:
    cur = await conn.execute(
        "DELETE FROM console_uploads WHERE created_at < now() - make_interval(secs => %s)",
        (older_than_s,),
    )
    return cur.rowcount
