"""The console's routes: each page module lists its own (``routes(services)``)."""

from __future__ import annotations

import falcon.asgi

from api.console import (
    account,
    activity,
    apps,
    chat_import,
    cleanup,
    graph,
    jobs_page,
    memories,
    memory_detail,
    signin,
    stats,
)
from api.console.services import ConsoleServices
from api.console.static_files import StaticFile

_PAGES = (
    signin,
    memories,
    memory_detail,
    cleanup,
    graph,
    apps,
    activity,
    stats,
    account,
    chat_import,
    jobs_page,
)


def add_routes(
    app: falcon.asgi.App[falcon.asgi.Request, falcon.asgi.Response], services: ConsoleServices
) -> None:
    app.add_route("/console/static/{name}", StaticFile())
    for page in _PAGES:
        for path, resource in page.routes(services):
            app.add_route(path, resource)
