"""``/console/account/import-chat``: memories from a ChatGPT or Claude data export.

1. GET: the upload form.
2. POST ``step=upload`` (multipart, ``file``): the file is read and what it
   holds is shown (format, conversations, messages, date range) with a
   confirm form. The parsed export is kept in PostgreSQL for this user for at
   most an hour under a random id (:mod:`api.console.chat_uploads`), so
   confirming needs no second upload and may reach any web process (an
   expiry asks for the file again).
3. POST ``step=confirm``: the import runs as a background job
   (:mod:`api.console.jobs`) and the browser goes to its progress page.
   Every write is a ``remember_batch`` tool call as the console (same checks,
   queue, idempotency and audit record as an assistant's). The job's
   operation key is the upload's id, so confirming the same upload twice
   (from any process, at once or later) goes to the same job; the upload
   itself is removed once its job has started.

Without a fact extractor (``LLM_BASE_URL``, ``LLM_MODEL``) the page says so
and offers only to store the user's own messages, tagged ``imported``.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any

import falcon.asgi

from api.console import chat_uploads
from api.console.guard import ConsoleRequest, new_operation_key
from api.console.jobs import Job
from api.console.services import ConsoleServices
from memory.call_keys import call_scope
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


class ImportChat:
    def __init__(self, services: ConsoleServices) -> None:
        self._s = services

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

    def _page(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, error: str, **context: Any
    ) -> None:
        """The import page; an ``error`` makes it a 400 showing that error."""
        self._s.renderer.page(
            req,
            resp,
            "chat_import.html",
            title="Import from ChatGPT or Claude",
            status=400 if error else 200,
            error=error,
            has_extractor=self._extractor is not None,
            **context,
        )

    def _upload_form(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, *, error: str = ""
    ) -> None:
        self._page(req, resp, error, found=None)

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
        # Sealed when the user's memories are: the stash holds their own messages.
        scope = await call_scope(self._s.runtime.deps, console.user_id)
        stash_id = await chat_uploads.put(
            self._s.pool, console.user_id, export, upload.filename, scope
        )
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
        self._page(
            req,
            resp,
            error,
            found=export.summary,
            format_name=FORMAT_NAMES[export.format],
            filename=filename,
            stash_id=stash_id,
            operation_key=new_operation_key(),
        )

    async def _confirm(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, console: ConsoleRequest
    ) -> None:
        upload_id = console.value("upload")
        key = f"chat-import:{upload_id}"
        earlier = await self._s.jobs.find_by_key(console.user_id, key) if upload_id else None
        if earlier is not None:
            self._s.renderer.redirect(resp, f"/console/jobs/{earlier.id}")
            return
        scope = await call_scope(self._s.runtime.deps, console.user_id)
        stashed = await chat_uploads.get(self._s.pool, console.user_id, upload_id, scope)
        if stashed is None:
            self._upload_form(
                req,
                resp,
                error="That upload is no longer here (it waits an hour). Upload the file again.",
            )
            return
        mode = console.value("mode", MESSAGES if self._extractor is None else EXTRACT)
        try:
            require_mode(mode, self._extractor)
        except ChatImportError as ex:
            export, filename = stashed.export, stashed.filename
            self._summary(req, resp, upload_id, export, filename, error=ex.public_message)
            return
        # The key makes a confirm sent twice (to any process) one job: the second finds it.
        job = await self._s.jobs.start(
            console.user_id,
            f"Import from {FORMAT_NAMES[stashed.export.format]}",
            self._work(console.user_id, stashed.export, mode),
            key=key,
        )
        if job.started:
            # The job holds the export now; the stored copy is no longer needed.
            await chat_uploads.discard(self._s.pool, console.user_id, upload_id)
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

            scope = await call_scope(services.runtime.deps, user_id)  # sealed: its keys
            report = await import_chats(
                services.pool,
                user_id,
                export,
                mode=mode,
                store_batch=store_batch,
                keys=scope.keys if scope is not None else None,
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
