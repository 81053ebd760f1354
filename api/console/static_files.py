"""``GET /console/static/{name}``: the console's own stylesheet, scripts and images.

Only files in ``api/console/static`` (no subpaths, no dot files) with a
known type. URLs carry a content hash (``Renderer.static_url``), so an
answer may be cached for a year.
"""

from __future__ import annotations

import falcon
import falcon.asgi

from api.console.render import STATIC

_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".txt": "text/plain; charset=utf-8",
}


class StaticFile:
    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, name: str) -> None:
        suffix = "." + name.rsplit(".", 1)[-1] if "." in name else ""
        path = STATIC / name
        if (
            "/" in name
            or "\\" in name
            or name.startswith(".")
            or suffix not in _TYPES
            or not path.is_file()
        ):
            raise falcon.HTTPNotFound()
        resp.content_type = _TYPES[suffix]
        resp.data = path.read_bytes()
        resp.set_header("Cache-Control", "public, max-age=31536000, immutable")
