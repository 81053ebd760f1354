"""``/console/account/import-chat``: memories from a ChatGPT or Claude data export.

1. GET: the upload form.
2. POST ``step=upload`` (multipart, ``file``): the file is read and what it
   holds is shown (format, conversations, messages, date range) with a
   confirm form. The parsed export is kept in this process's memory for this
   user for at most :data:`STASH_TTL_S` under a random id, so confirming needs
   no second upload (a restart or an expiry asks for the file again).
3. POST ``step=confirm``: the import runs as a background job
   (:mod:`api.console.jobs`) and the browser goes to its progress page.
   Every write is a ``remember_batch`` tool call as the console (same checks,
   queue, idempotency and audit record as an assistant's). Confirming the same
   upload twice goes to the same job.

Without a fact extractor (``LLM_BASE_URL``, ``LLM_MODEL``) the page says so
and offers only to store the user's own messages, tagged ``imported``.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import asdict, dataclass
from typing import Any

import falcon.asgi

from api.console.guard import ConsoleRequest, new_operation_key
from api.console.jobs import Job
from api.console.services import ConsoleServices
from memory.chat_import import (
    EXTRACT,
    MESSAGES,
    ChatImportError,
    ImportReport,
    import_chats,
    require_mode,
)
from memory.rules.chat_exports import FORMAT_NAMES, ChatExport, ChatExportError, parse_export

PATH = "/console/account/import-chat"
#: Seconds an uploaded, parsed export waits for its confirmation.
STASH_TTL_S = 30 * 60
#: Uploads waiting at once, all users together (the oldest go first).
MAX_STASHED = 20


@dataclass
class _Stashed:
    user_id: int
    export: ChatExport
    filename: str
    at: float
    job_id: str | None = None


class _Stash:
    """Parsed uploads awaiting confirmation, by random id; each belongs to one user."""

    def __init__(self) -> None:
        self._items: dict[str, _Stashed] = {}

    def put(self, user_id: int, export: ChatExport, filename: str) -> str:
        self._prune()
        while len(self._items) >= MAX_STASHED:
            del self._items[next(iter(self._items))]
        stash_id = secrets.token_urlsafe(16)
        self._items[stash_id] = _Stashed(user_id, export, filename, time.monotonic())
        return stash_id

    def get(self, user_id: int, stash_id: str) -> _Stashed | None:
        self._prune()
        item = self._items.get(stash_id)
        return item if item is not None and item.user_id == user_id else None

    def _prune(self) -> None:
        now = time.monotonic()
        for key, item in list(self._items.items()):
            if now - item.at > STASH_TTL_S:
                del self._items[key]


class ImportChat:
    def __init__(self, services: ConsoleServices) -> None:
        self._s = services
        self._stash = _Stash()

    @property
    def _extractor(self) -> Any:
        return self._s.runtime.deps.fact_extractor

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        self._upload_form(req, resp)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        console: ConsoleRequest = req.context.console
        if console.value("step") == "confirm":
            await self._confirm(req, resp, console)
        else:
            await self._read_upload(req, resp, console)

    def _upload_form(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, *, error: str = ""
    ) -> None:
        self._s.renderer.page(
            req,
            resp,
            "chat_import.html",
            title="Import from ChatGPT or Claude",
            status=400 if error else 200,
            error=error,
            found=None,
            has_extractor=self._extractor is not None,
        )

    async def _read_upload(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, console: ConsoleRequest
    ) -> None:
        upload = console.files.get("file")
        if upload is None or not upload.data:
            self._upload_form(req, resp, error="Choose your export file to upload.")
            return
        try:
            # Parsing a large export takes seconds: off the event loop, which serves everyone.
            export = await asyncio.to_thread(parse_export, upload.data)
        except ChatExportError as ex:
            self._upload_form(req, resp, error=str(ex))
            return
        stash_id = self._stash.put(console.user_id, export, upload.filename)
        self._summary(req, resp, stash_id, export, upload.filename)

    def _summary(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        stash_id: str,
        export: ChatExport,
        filename: str,
        *,
        error: str = "",
    ) -> None:
        self._s.renderer.page(
            req,
            resp,
            "chat_import.html",
            title="Import from ChatGPT or Claude",
            status=400 if error else 200,
            error=error,
            found=export.summary,
            format_name=FORMAT_NAMES[export.format],
            filename=filename,
            stash_id=stash_id,
            operation_key=new_operation_key(),
            has_extractor=self._extractor is not None,
        )

    async def _confirm(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, console: ConsoleRequest
    ) -> None:
        stashed = self._stash.get(console.user_id, console.value("upload"))
        if stashed is None:
            self._upload_form(
                req,
                resp,
                error="That upload is no longer here (it waits 30 minutes). Upload the file again.",
            )
            return
        if stashed.job_id is not None and self._s.jobs.find(console.user_id, stashed.job_id):
            self._s.renderer.redirect(resp, f"/console/jobs/{stashed.job_id}")
            return
        mode = console.value("mode", MESSAGES if self._extractor is None else EXTRACT)
        try:
            require_mode(mode, self._extractor)
        except ChatImportError as ex:
            upload = console.value("upload")
            export, filename = stashed.export, stashed.filename
            self._summary(req, resp, upload, export, filename, error=ex.public_message)
            return
        job = self._s.jobs.start(
            console.user_id,
            f"Import from {FORMAT_NAMES[stashed.export.format]}",
            self._work(console.user_id, stashed.export, mode),
        )
        stashed.job_id = job.id
        self._s.renderer.redirect(resp, f"/console/jobs/{job.id}")

    def _work(self, user_id: int, export: ChatExport, mode: str) -> Any:
        services = self._s

        async def store_batch(items: list[dict[str, Any]], key: str) -> dict[str, Any]:
            return await services.tools.call(user_id, "remember_batch", {"items": items}, key=key)

        async def work(job: Job) -> None:
            total = len(export.conversations)
            job.progress(0, total, f"0 of {total} conversations.")

            def progress(done: int, total: int, report: ImportReport) -> None:
                job.progress(done, total, report.describe())

            report = await import_chats(
                services.pool,
                user_id,
                export,
                mode=mode,
                store_batch=store_batch,
                extractor=services.runtime.deps.fact_extractor if mode == EXTRACT else None,
                max_text_chars=services.settings.max_text_chars,
                max_batch=services.settings.max_batch_size,
                progress=progress,
            )
            job.result = asdict(report)
            job.message = report.describe()

        return work


def routes(services: ConsoleServices) -> list[tuple[str, object]]:
    return [(PATH, ImportChat(services))]
