"""``/healthz``: the process is up and serving HTTP.

Liveness only: it touches neither the database nor Redis, so a slow
dependency does not get a healthy web process restarted.
"""

from __future__ import annotations

import falcon
import falcon.asgi


class Health:
    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        resp.media = {"status": "ok"}
        resp.set_header("Cache-Control", "no-store")
