"""The relation graph's use cases: ``query_relations`` and the extraction job (SUPPLEMENT §6).

``extract_relations`` is what the background actor runs after a memory's
text is stored or changed; :func:`text_stored` is how the write paths ask for
it, through the ``Deps.on_text_stored`` hook, once their transaction has
committed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from storage import relations as store

from . import graph
from .deps import Deps
from .errors import invalid
from .extractors import Extractor, make_extractor
from .inputs import Args

#: Hops query_relations follows by default, and at most.
DEFAULT_HOPS = 2
MAX_HOPS = 5
_ENTITY_CHARS = 500

_log = logging.getLogger(__name__)


async def query_relations(deps: Deps, user_id: int, raw: dict[str, Any], **_: Any) -> dict[str, Any]:
    args = Args(raw)
    entity = args.string("entity", required=True, max_len=_ENTITY_CHARS)
    assert entity is not None
    if not entity.strip():
        raise invalid("entity must not be empty: name a person, place, thing or 'me'.", field="entity")
    hops = args.integer("max_hops", default=DEFAULT_HOPS, minimum=1, cap=MAX_HOPS)
    assert hops is not None
    cap = deps.settings.graph_max_relations
    walk = graph.Traversal(entity, max_hops=hops, max_edges=cap)
    texts: dict[int, str] = {}
    async with deps.pool.connection() as conn:
        async with conn.transaction():  # one snapshot for the whole walk
            while (request := walk.wanted()) is not None:
                room = cap + 1 + len(walk.edges)  # one more than fits: truncation shows
                rows = await store.edges_touching(conn, user_id, request.expand, limit=room)
                rows += await store.role_edges(
                    conn, user_id, request.owners, request.predicates, limit=room
                )
                texts.update((r.memory_id, r.source_text) for r in rows)
                walk.feed(graph.Edge(r.id, r.subject, r.predicate, r.object, r.memory_id) for r in rows)
    relations = [
        {
            "subject": edge.subject,
            "predicate": edge.predicate,
            "object": edge.object,
            "source_memory_id": edge.memory_id,
            "source_text": texts[edge.memory_id],
        }
        for edge, _hop in walk.edges
    ]
    summary: dict[str, Any] = {"count": len(relations)}
    if walk.truncated:
        summary["truncated"] = True
    return {"ok": True, "entity": entity, "relations": relations, "summary": summary}


async def extract_relations(
    deps: Deps, user_id: int, memory_id: int, *, extractor: Extractor | None = None
) -> int | None:
    """Replace the memory's edges with those extracted from its current text.

    Returns the number of edges stored, or None when there was nothing to do
    (the memory is gone or forgotten, or its text changed while extracting:
    the job queued by that change does it). Extraction failures
    (:class:`~memory.extractors.ExtractionError`) and database errors
    propagate so that the job is retried; the memory itself is never touched.
    With ``RELATION_EXTRACTOR=off`` the memory's old edges are removed.
    """
    chosen = extractor or deps.extractor or make_extractor(deps.settings)
    async with deps.pool.connection() as conn:
        source = await store.source_text(conn, user_id, memory_id)
    if source is None or source.deleted:
        return None
    relations = await chosen.extract(source.text) if chosen is not None else []
    edges = [store.NewEdge(r.subject, r.predicate, r.object) for r in relations]
    async with deps.pool.connection() as conn:
        async with conn.transaction():
            current = await store.source_text(conn, user_id, memory_id, lock=True)
            if current is None or current.deleted or current.text != source.text:
                return None
            await store.delete_edges(conn, user_id, memory_id)
            await store.insert_edges(conn, user_id, memory_id, edges)
    return len(edges)


async def text_stored(deps: Deps, user_id: int, memory_ids: list[int]) -> None:
    """Tell the composition root that these memories' text was stored or changed.

    Call only after the write's transaction has committed. Runs the hook in a
    thread (it may talk to Redis) and never raises: the write has succeeded,
    and a lost extraction must not turn it into a failure.
    """
    hook = deps.on_text_stored
    if hook is None or not memory_ids:
        return
    try:
        await asyncio.to_thread(hook, user_id, list(memory_ids))
    except Exception:
        _log.exception("could not enqueue relation extraction for %d memories", len(memory_ids))
