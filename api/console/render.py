"""Console pages from Jinja2 templates (``api/console/templates``), escaped by default.

Every page extends ``base.html``: the navigation, the signed-in account,
the sign-out form, our one stylesheet and one script (no inline script or
style: the Content-Security-Policy allows neither). Links go through
:meth:`Renderer.url` so a server mounted under a path prefix
(``OWNSONA_PUBLIC_URL=https://host/ownsona``) links within it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import falcon
import falcon.asgi
import jinja2

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"


@dataclass(frozen=True)
class NavItem:
    path: str
    label: str


#: The console's pages, in the navigation's order (their paths are part of the contract).
NAV = (
    NavItem("/console/memories", "Memories"),
    NavItem("/console/cleanup", "Clean-up"),
    NavItem("/console/graph", "Graph"),
    NavItem("/console/apps", "Apps"),
    NavItem("/console/activity", "Activity"),
    NavItem("/console/stats", "Stats"),
    NavItem("/console/account", "Account"),
)


#: The notices a page shows after a redirect (``?notice=<code>``): fixed texts, so a
#: link can never make the console say anything else. Page modules add their own.
NOTICES: dict[str, str] = {
    "signed-out": "You are signed out.",
}


class Renderer:
    """Renders console templates into Falcon responses."""

    def __init__(self, public_url: str) -> None:
        self._base = urlsplit(public_url).path.rstrip("/")
        self._env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(TEMPLATES),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self._versions: dict[str, str] = {}
        self._env.globals.update(
            url=self.url, static=self.static_url, nav=NAV, when=when, query=self.query_url
        )

    def url(self, path: str) -> str:
        """``path`` (``/console/...``) as the browser must ask for it."""
        return self._base + path

    def query_url(self, path: str, params: Mapping[str, Any]) -> str:
        """``path`` with the non-empty ``params`` as its query string."""
        kept = [(k, v) for k, v in params.items() if v not in (None, "", False)]
        kept = [(k, "1" if v is True else str(v)) for k, v in kept]
        return self.url(path) + ("?" + urlencode(kept) if kept else "")

    def static_url(self, name: str) -> str:
        """A static file's URL, versioned by its content (so it can be cached for long)."""
        version = self._versions.get(name)
        if version is None:
            version = hashlib.sha256((STATIC / name).read_bytes()).hexdigest()[:12]
            self._versions[name] = version
        return self.url(f"/console/static/{name}") + f"?v={version}"

    def html(self, template: str, **context: Any) -> str:
        return self._env.get_template(template).render(**context)

    def page(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        template: str,
        *,
        title: str,
        status: int = 200,
        **context: Any,
    ) -> None:
        """Render ``template`` as the answer, with what every page needs in its context."""
        console = getattr(req.context, "console", None)
        context.setdefault("notice", NOTICES.get(req.get_param("notice") or ""))
        resp.status = status
        resp.content_type = "text/html; charset=utf-8"
        resp.data = self.html(
            template,
            title=title,
            account=getattr(console, "account", None),
            csrf_token=getattr(console, "csrf_token", ""),
            current=req.path,
            **context,
        ).encode("utf-8")

    def error(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        status: int,
        title: str,
        message: str,
    ) -> None:
        self.page(req, resp, "error.html", title=title, status=status, message=message)

    def redirect(self, resp: falcon.asgi.Response, path: str, **params: Any) -> None:
        """303 to a console path: the answer to a form's POST (the browser GETs it)."""
        resp.status = falcon.HTTP_303
        resp.set_header("Location", self.query_url(path, params))
        resp.data = b""


def when(value: datetime | str | None) -> str:
    """A timestamp as a person reads it (UTC, to the minute); an em dash for none."""
    if value is None or value == "":
        return "—"
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
        return parsed.strftime("%Y-%m-%d %H:%M UTC")
    return value.strftime("%Y-%m-%d %H:%M UTC")
