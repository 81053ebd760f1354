"""``GET /console/jobs/{id}``: a background job's progress (HTML, or JSON for the script)."""

from __future__ import annotations

import falcon
import falcon.asgi

from api.console.cleanup_scans import scan_page
from api.console.guard import ConsoleRequest
from api.console.services import ConsoleServices


class JobStatus:
    def __init__(self, services: ConsoleServices) -> None:
        self._s = services

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, job_id: str
    ) -> None:
        console: ConsoleRequest = req.context.console
        # The job's row, whichever web process runs it.
        job = await self._s.jobs.find(console.user_id, job_id)
        if job is None:
            self._s.renderer.error(req, resp, 404, "Not found", "There is no such job.")
            return
        if "application/json" in (req.get_header("Accept") or ""):
            resp.media = job.to_json()
            return
        back = scan_page(job.subject)
        self._s.renderer.page(
            req,
            resp,
            "job.html",
            title="Progress",
            job=job.to_json(),
            back=back or ("/console/account", {}),
            back_label="Back to clean-up" if back else "Back to your account",
        )


def routes(services: ConsoleServices) -> list[tuple[str, object]]:
    return [("/console/jobs/{job_id}", JobStatus(services))]
