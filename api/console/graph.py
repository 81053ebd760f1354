"""``GET /console/graph?entity=NAME&hops=N``: the relations around an entity, drawn and listed.

The edges come from the ``query_relations`` tool (called as the console):
a node-link drawing (:mod:`api.console.graph_svg`) where each edge links to
the memory it was extracted from and each node to its own graph, and the
same edges as a table, the accessible alternative. No tool lists the most
connected entities, so without an entity the page shows the search box, a
hint and a link to start from the user themself.
"""

from __future__ import annotations

from typing import Any

import falcon
import falcon.asgi
from markupsafe import Markup

from api.console import graph_svg
from api.console.guard import ConsoleRequest
from api.console.services import ConsoleServices
from api.console.tools import failure

#: The hops the form offers (the tool's cap is 5).
HOPS = (1, 2, 3, 4, 5)
DEFAULT_HOPS = 2
#: The entity the rules give first-person words ("I", "my"): the owner.
SELF = "the user"


class Graph:
    def __init__(self, services: ConsoleServices) -> None:
        self._s = services

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        console: ConsoleRequest = req.context.console
        entity = (req.get_param("entity") or "").strip()
        hops = _hops(req.get_param("hops"))
        context: dict[str, Any] = {
            "entity": entity,
            "hops": hops,
            "hop_choices": HOPS,
            "self_entity": SELF,
            "relations": [],
            "svg": None,
            "error": None,
            "truncated": False,
            "hidden": 0,
        }
        if not entity:
            self._page(req, resp, context, title="Graph")
            return
        payload = await self._s.tools.call(
            console.user_id, "query_relations", {"entity": entity, "max_hops": hops}
        )
        problem = failure(payload)
        if problem is not None:
            context["error"] = problem.message
            status = 400 if problem.code == "INVALID_INPUT" else 503
            self._page(req, resp, context, title="Graph", status=status)
            return
        relations = [r for r in payload.get("relations", []) if isinstance(r, dict)]
        edges = [
            graph_svg.Edge(
                str(r["subject"]), str(r["predicate"]), str(r["object"]), int(r["source_memory_id"])
            )
            for r in relations
        ]
        placed = graph_svg.layout(entity, edges)
        drawing = graph_svg.draw(
            entity,
            edges,
            entity_href=lambda name: self._s.renderer.query_url(
                "/console/graph", {"entity": name, "hops": hops}
            ),
            memory_href=lambda memory_id: self._s.renderer.url(f"/console/memories/{memory_id}"),
            title=f"Relations of {entity}",
        )
        # Safe to embed: graph_svg builds it with ElementTree, which escapes every label.
        context["svg"] = Markup(drawing) if drawing else None  # noqa: S704
        context["relations"] = relations
        context["hidden"] = placed.hidden
        context["truncated"] = bool(payload.get("summary", {}).get("truncated"))
        self._page(req, resp, context, title=f"Graph of {entity}")

    def _page(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        context: dict[str, Any],
        *,
        title: str,
        status: int = 200,
    ) -> None:
        self._s.renderer.page(req, resp, "graph.html", title=title, status=status, **context)


def _hops(raw: str | None) -> int:
    try:
        value = int(raw or DEFAULT_HOPS)
    except ValueError:
        return DEFAULT_HOPS
    return min(max(value, HOPS[0]), HOPS[-1])


def routes(services: ConsoleServices) -> list[tuple[str, object]]:
    return [("/console/graph", Graph(services))]
