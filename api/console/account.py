"""``/console/account``: the owner's password, sign-ins, and export and import of memories.

- ``POST /console/account/password``: a new password. The current one is
  checked behind the sign-in throttle; success ends every browser sign-in,
  refresh token, access token and CLI token of the account (apps must
  connect again) and signs this browser in again with a new session.
- ``POST /console/account/sign-out-everywhere``: ends every browser
  sign-in of the account, this one included. Apps stay connected.
- ``POST /console/account/export``: the ``ownsona export --user`` JSON Lines
  of this account, as a download. It is written to a spooled temporary file
  first (memory up to :data:`SPOOL_BYTES`, then disk), so a failed export
  is an error page, never a truncated file that looks whole.
- ``POST /console/account/import``: an export file, put back into this
  account only (whatever account the file names) by the use case of
  ``ownsona import``, as a background job with progress. The file is checked
  whole before the job starts: a bad file is refused and nothing is written.
  Memories already present are skipped, so a second import stores nothing.

Memory text, passwords and file contents are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import falcon
import falcon.asgi

from api.console.guard import ConsoleRequest, new_operation_key, set_session_cookie
from api.console.jobs import Job
from api.console.render import NOTICES
from api.console.services import ConsoleServices
from api.console.tools import CONSOLE_CLIENT_ID
from auth.account_security import change_own_password, end_all_sessions
from auth.accounts import normalize_username
from memory.backup import ImportSummary, export_store, import_store
from memory.backup_file import check_file
from memory.errors import MemoryServiceError
from storage.errors import StorageError

logger = logging.getLogger("ownsona.api.console.account")

#: An export is held in memory up to this size, then in a temporary file.
SPOOL_BYTES = 4 * 1024 * 1024
_CHUNK = 64 * 1024
#: The largest memory id a file may carry (the largest integer JSON clients keep exactly).
MAX_FILE_ID = 2**53 - 1
_FORMS = ("password", "export", "import")

NOTICES.update(
    {
        "account-password-changed": (
            "Your password is changed. Your other browsers are signed out and your apps "
            "must connect again; this browser stays signed in."
        ),
        "account-signed-out-everywhere": (
            "You are signed out of every browser, this one included. Your apps stay "
            "connected: disconnect them on the Apps page."
        ),
    }
)


class Account:
    """``GET /console/account``."""

    def __init__(self, services: ConsoleServices) -> None:
        self._s = services

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        show(self._s, req, resp)


def show(
    services: ConsoleServices,
    req: falcon.asgi.Request,
    resp: falcon.asgi.Response,
    *,
    status: int = 200,
    errors: dict[str, str] | None = None,
) -> None:
    """The account page; ``errors`` maps a form (password, export, import) to its problem."""
    services.renderer.page(
        req,
        resp,
        "account.html",
        title="Account",
        status=status,
        errors={form: "" for form in _FORMS} | (errors or {}),
        import_key=new_operation_key(),
        max_upload_mb=max(1, services.settings.console_upload_max_bytes // (1024 * 1024)),
    )


class ChangePassword:
    """``POST /console/account/password``."""

    def __init__(self, services: ConsoleServices) -> None:
        self._s = services

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        console: ConsoleRequest = req.context.console
        assert console.account is not None
        outcome = await change_own_password(
            self._s.pool,
            self._s.login_guard,
            user_id=console.user_id,
            username=console.account.username,
            current=console.value("current_password"),
            new=console.value("new_password"),
            repeated=console.value("repeat_password"),
            address=req.remote_addr or "",
        )
        if not outcome.changed:
            status = 400
            if outcome.retry_after_s is not None:
                resp.set_header("Retry-After", str(outcome.retry_after_s))
                status = 429
            show(self._s, req, resp, status=status, errors={"password": outcome.problem or ""})
            return
        logger.info("console password change of user %s", console.user_id)
        # Every session ended with the old password; this browser gets a new one.
        session = await self._s.sessions.start(console.user_id)
        set_session_cookie(
            resp,
            secure=self._s.settings.secure_cookies,
            value=session,
            max_age=self._s.sessions.ttl_s,
        )
        self._s.renderer.redirect(resp, "/console/account", notice="account-password-changed")


class SignOutEverywhere:
    """``POST /console/account/sign-out-everywhere``."""

    def __init__(self, services: ConsoleServices) -> None:
        self._s = services

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        console: ConsoleRequest = req.context.console
        ended = await end_all_sessions(self._s.pool, console.user_id)
        logger.info("console sign-out everywhere of user %s (%d sessions)", console.user_id, ended)
        set_session_cookie(resp, secure=self._s.settings.secure_cookies, value="", max_age=0)
        self._s.renderer.redirect(resp, "/console/sign-in", notice="account-signed-out-everywhere")


class Export:
    """``POST /console/account/export``: this account's JSON Lines, as an attachment."""

    def __init__(self, services: ConsoleServices) -> None:
        self._s = services

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        console: ConsoleRequest = req.context.console
        assert console.account is not None
        username = console.account.username
        spool: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES, mode="w+b")  # noqa: SIM115
        started = time.monotonic()
        try:
            summary = await export_store(
                self._s.pool,
                lambda text: spool.write(text.encode("utf-8")),
                username=username,
                keyring=self._s.runtime.deps.keyring,  # sealed rows: opened (the user's own JSON)
            )
        except (MemoryServiceError, StorageError) as ex:
            spool.close()
            code = ex.code if isinstance(ex, MemoryServiceError) else "DATABASE_ERROR"
            self._audit(console.user_id, "export", {"ok": False, "error": {"code": code}}, started)
            logger.error("console export of user %s failed: %s", console.user_id, type(ex).__name__)
            show(
                self._s,
                req,
                resp,
                status=503,
                errors={"export": "The export could not be made. Try again in a moment."},
            )
            return
        self._audit(console.user_id, "export", {"ok": True}, started)
        logger.info(
            "console export of user %s: %d memories, %d relations",
            console.user_id,
            summary.memories,
            summary.relations,
        )
        size = spool.tell()
        spool.seek(0)
        resp.content_type = "application/jsonl; charset=utf-8"
        resp.downloadable_as = f"ownsona-export-{username}-{datetime.now(UTC).date()}.jsonl"
        resp.content_length = size
        resp.stream = _chunks(spool)

    def _audit(self, user_id: int, tool: str, payload: dict[str, Any], started: float) -> None:
        audit(self._s, user_id, tool, payload, started, read_only=True)


async def _chunks(spool: IO[bytes]) -> AsyncIterator[bytes]:
    try:
        while chunk := spool.read(_CHUNK):
            yield chunk
    finally:
        spool.close()


class Import:
    """``POST /console/account/import`` (multipart, field ``file``)."""

    def __init__(self, services: ConsoleServices) -> None:
        self._s = services

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        console: ConsoleRequest = req.context.console
        assert console.account is not None
        # The form's operation key is the job's: a double submit, to whichever web process,
        # finds the first job (before the file is read again) and starts nothing.
        key = f"import:{console.value('operation')}" if console.value("operation") else None
        earlier = await self._s.jobs.find_by_key(console.user_id, key) if key else None
        if earlier is not None:
            self._s.renderer.redirect(resp, f"/console/jobs/{earlier.id}")
            return
        upload = console.files.get("file")
        if upload is None or not upload.data:
            self._refuse(req, resp, "Choose an export file to import.")
            return
        path = await asyncio.to_thread(_save, upload.data)
        try:
            problem = await _check(path)
        except BaseException:
            _discard(path)
            raise
        if problem is not None:
            _discard(path)
            self._refuse(req, resp, problem)
            return
        try:
            job = await self._s.jobs.start(
                console.user_id,
                "Import",
                _ImportWork(self._s, console.user_id, console.account.username, path),
                key=key,
            )
        except BaseException:
            _discard(path)
            raise
        if not job.started:
            _discard(path)  # the same form, sent twice at once: the first one's job imports it
        self._s.renderer.redirect(resp, f"/console/jobs/{job.id}")

    def _refuse(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, problem: str) -> None:
        show(self._s, req, resp, status=400, errors={"import": problem})


def _save(data: bytes) -> Path:
    fd, name = tempfile.mkstemp(prefix="ownsona-import-", suffix=".jsonl")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return Path(name)


def _discard(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


async def _check(path: Path) -> str | None:
    """Why the file cannot be imported into one account, or None when it can."""
    try:
        header = await asyncio.to_thread(check_file, path)
    except MemoryServiceError as ex:
        return f"This file cannot be imported: {ex.message} Nothing was imported."
    if header.max_memory_id > MAX_FILE_ID:
        # Ids are kept on import and the id sequence moves past them: a file must not be
        # able to push it near its end for every account of the server.
        return (
            f"This file names memory ids above {MAX_FILE_ID}, which no OwnSona server "
            "gives. Nothing was imported."
        )
    if len(header.users) != 1:
        return (
            f"This file holds the memories of {len(header.users)} accounts; the console "
            "imports an export of one account (the Export button above makes one). "
            "Nothing was imported."
        )
    return None


class ImportFailed(Exception):
    """An import that stopped; ``public_message`` is what the job page shows."""

    def __init__(self, public_message: str) -> None:
        super().__init__(public_message)
        self.public_message = public_message


class _JobProgress:
    """The use case's Progress protocol, reported to the job's bar."""

    def __init__(self, job: Job) -> None:
        self._job = job

    def start(self, total: int) -> None:
        self._job.progress(0, total, f"0 of {total} memories.")

    def advance(self, count: int) -> None:
        done = self._job.done + count
        total = self._job.total
        self._job.progress(done, message=f"{done} of {total} memories." if total else None)


class _ImportWork:
    def __init__(self, services: ConsoleServices, user_id: int, username: str, path: Path) -> None:
        self._s = services
        self._user_id = user_id
        self._username = username
        self._path = path

    async def __call__(self, job: Job) -> None:
        started = time.monotonic()
        try:
            summary = await import_store(
                self._s.pool,
                self._s.runtime.deps.embedder,
                self._path,
                into_user=self._username,
                username_rule=normalize_username,
                progress=_JobProgress(job),
                keyring=self._s.runtime.deps.keyring if self._s.settings.seal_memories else None,
            )
        except MemoryServiceError as ex:
            audit(self._s, self._user_id, "import", ex.to_payload(), started, read_only=False)
            raise ImportFailed(f"The import stopped: {ex.message}") from ex
        except StorageError as ex:
            payload = {"ok": False, "error": {"code": "DATABASE_ERROR"}}
            audit(self._s, self._user_id, "import", payload, started, read_only=False)
            raise ImportFailed(
                "The import stopped: the database could not be reached. What was stored is "
                "kept; import the same file again to finish."
            ) from ex
        finally:
            await asyncio.to_thread(_discard, self._path)
        counts = _counts(summary)
        payload = {"ok": True, "summary": counts}
        audit(self._s, self._user_id, "import", payload, started, read_only=False)
        job.result = counts
        job.progress(job.total or job.done, message=_summary_text(summary))
        logger.info("console import of user %s: %s", self._user_id, counts)


def _counts(summary: ImportSummary) -> dict[str, int]:
    return {k: v for k, v in asdict(summary).items() if isinstance(v, int)}


def _summary_text(s: ImportSummary) -> str:
    text = (
        f"Stored {s.inserted} memories and {s.relations} relations; skipped "
        f"{s.already_present} already present and {s.duplicates} whose text you already hold."
    )
    if s.centroids_cleared:
        text += (
            f" {s.centroids_cleared} learned contexts belonged to another embedding model "
            "and were cleared."
        )
    return text


def audit(
    services: ConsoleServices,
    user_id: int,
    tool: str,
    payload: dict[str, Any],
    started: float,
    *,
    read_only: bool,
) -> None:
    """Record an export or import in the audit log, as the console's."""
    log = services.runtime.audit
    if log is None:
        return
    log.record(
        user_id=user_id,
        entry="console",
        client_id=CONSOLE_CLIENT_ID,
        token_jti=None,
        tool=tool,
        read_only=read_only,
        arguments={},
        payload=payload,
        duration_s=time.monotonic() - started,
    )


def routes(services: ConsoleServices) -> list[tuple[str, object]]:
    return [
        ("/console/account", Account(services)),
        ("/console/account/password", ChangePassword(services)),
        ("/console/account/sign-out-everywhere", SignOutEverywhere(services)),
        ("/console/account/export", Export(services)),
        ("/console/account/import", Import(services)),
    ]
