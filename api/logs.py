""":class:`RequestLog`: the web process's request ids and access lines.

The Falcon middleware assigns the request id (a sane ``X-Request-Id``
header, else a new one), returns it in the response header, and writes the
access line: the path only, never the query string (authorization requests
carry ``state`` and PKCE values there). How lines are formatted and
redacted is ``bootstrap.logs``, shared by every process.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable

import falcon
import falcon.asgi

from memory.request_ids import accept_request_id, new_request_id, request_id_var

#: The header a request id arrives in and is returned in.
REQUEST_ID_HEADER = "X-Request-Id"
#: Paths polled by probes and scrapers: their access lines are DEBUG, not INFO.
QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})

_access = logging.getLogger("ownsona.access")

#: ``(method, route template or "unmatched", status, seconds)`` for each request.
RequestObserver = Callable[[str, str, int, float], None]


class RequestLog:
    """Falcon middleware: the request id, its response header, and one access line per request.

    Put it first, so its response hook runs for every request, refused ones included.
    """

    def __init__(self, observer: RequestObserver | None = None) -> None:
        self._observer = observer

    async def process_request(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        request_id = accept_request_id(req.get_header(REQUEST_ID_HEADER)) or new_request_id()
        req.context.request_id = request_id
        req.context.request_id_token = request_id_var.set(request_id)
        req.context.started = time.perf_counter()

    async def process_response(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        resource: object,
        req_succeeded: bool,
    ) -> None:
        request_id = req.context.get("request_id")
        started = req.context.get("started")
        if request_id is None or started is None:
            return
        resp.set_header(REQUEST_ID_HEADER, request_id)
        seconds = time.perf_counter() - started
        status = resp.status_code
        route = req.uri_template or "unmatched"
        # The path only: query strings can carry OAuth state and PKCE values.
        level = logging.DEBUG if req.path in QUIET_PATHS and status < 500 else logging.INFO
        _access.log(
            level,
            "%s %s %d %.1fms",
            req.method,
            req.path,
            status,
            seconds * 1000,
            extra={
                "method": req.method,
                "path": req.path,
                "status": status,
                "duration_ms": round(seconds * 1000, 2),
            },
        )
        if self._observer is not None:
            self._observer(req.method, route, status, seconds)
        token = req.context.get("request_id_token")
        if token is not None:
            # Set in another context: nothing of ours to undo.
            with contextlib.suppress(ValueError):
                request_id_var.reset(token)
