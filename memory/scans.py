"""``find_near_duplicates`` and ``find_conflicts``: read-only cleanup diagnostics.

SUPPLEMENT §5 and the tools chapter: candidate pairs come from each active
row's top-10 neighbours, a pair qualifies at ``threshold`` or above (and, for
conflicts, when its two rows share a tag), and groups are the connected
components of qualifying pairs (union-find), strongest first.
``find_conflicts`` also pairs memories whose extracted relations give one
single-valued slot different values, whatever their cosine (issue 17,
docs/find_conflicts.md): such groups carry ``reason: "relation"`` and come
first, the others ``reason: "similarity"``.

Finding every row's top-10 is n nearest-neighbour searches at once. Up to
``IN_MEMORY_LIMIT`` active rows (the normal case) the scan reads the user's
vectors once and searches them in memory (:mod:`memory.rules.knn`: exact up to
8k rows, IVF-style beyond), which at 100k rows is several times faster than
one pgvector HNSW query per row; a larger store falls back to batched HNSW
queries, ``PROBE_BATCH`` rows per statement over ``SCAN_CONNECTIONS``
connections, which keeps memory bounded. The heavy work runs in a thread so
the worker's event loop keeps serving other messages.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from memory import graph
from memory.rules import knn
from memory.rules.clusters import Cluster, cluster_pairs
from storage import scans as store

from .calls import CallMeta
from .commands.handling import handles
from .commands.scans import FindConflicts, FindNearDuplicates, Scan
from .deps import Deps
from .shapes import match_shape

#: Neighbours looked up per active row (the tools chapter's fixed top-10).
NEIGHBOURS = 10
#: Most active rows searched in memory (about 1.5 KB each at 384 dimensions).
IN_MEMORY_LIMIT = 200_000
#: Probe ids per statement on the HNSW path.
PROBE_BATCH = 500
#: HNSW statements in flight at once (each on its own pooled connection).
SCAN_CONNECTIONS = 3
#: Memories still owed their relation extraction that find_conflicts reads with the rules itself.
OWED_INLINE_LIMIT = 2000
#: Members listed per group; a larger group (a low threshold on a big store) is cut, flagged.
MAX_GROUP_MEMBERS = 200


@handles(FindNearDuplicates, reads=True)
async def find_near_duplicates(
    deps: Deps, meta: CallMeta, command: FindNearDuplicates
) -> dict[str, Any]:
    return await _scan(deps, meta.user_id, command)


@handles(FindConflicts, reads=True)
async def find_conflicts(deps: Deps, meta: CallMeta, command: FindConflicts) -> dict[str, Any]:
    return await _scan(deps, meta.user_id, command, relations=True)


async def _scan(
    deps: Deps, user_id: int, command: Scan, *, relations: bool = False
) -> dict[str, Any]:
    threshold, max_groups, shared_tag = command.threshold, command.max_groups, command.SHARED_TAG
    pairs = await qualifying_pairs(deps, user_id, threshold=threshold, shared_tag=shared_tag)
    related = await relation_pairs(deps, user_id, shared_tag=shared_tag) if relations else []
    clusters = await asyncio.to_thread(cluster_pairs, pairs + related)
    reasons: dict[tuple[int, ...], str] = {}
    if relations:
        clusters, reasons = _relations_first(clusters, related)
    clusters = clusters[:max_groups]
    async with deps.pool.connection() as conn:
        rows = await store.rows_by_ids(
            conn, user_id, [i for c in clusters for i in c.ids[:MAX_GROUP_MEMBERS]]
        )
    groups = []
    for cluster in clusters:
        group = _group(cluster, rows)
        if group is not None:
            if relations:
                group["reason"] = reasons[cluster.ids]
            groups.append(group)
    return {
        "ok": True,
        "threshold": threshold,
        "groups": groups,
        "summary": {"groups": len(groups), "pairs": sum(g["pair_count"] for g in groups)},
    }


async def relation_pairs(
    deps: Deps, user_id: int, *, shared_tag: bool
) -> list[tuple[int, int, float]]:
    """``(id, id, cosine)`` of the memories whose relations give one functional slot different
    values (:mod:`memory.graph.conflicts`), whatever their cosine; with ``shared_tag`` only
    pairs that share a tag.

    Reads the stored edges; a memory still owed its extraction (stored a moment ago,
    its job not run yet) is read with the rules extractor here instead, the newest
    ``OWED_INLINE_LIMIT`` of them. With ``RELATION_EXTRACTOR=off`` there are none.
    """
    if deps.settings.relation_extractor == "off":
        return []
    async with deps.pool.connection() as conn:
        edges = await store.functional_edges(
            conn, user_id, graph.FUNCTIONAL_PATTERNS, tagged_only=shared_tag
        )
        owed = await store.owed_texts(
            conn, user_id, tagged_only=shared_tag, limit=OWED_INLINE_LIMIT
        )
    found, tags = await asyncio.to_thread(_slot_conflicts, edges, owed)
    if shared_tag:
        found = [(a, b) for a, b in found if tags[a] & tags[b]]
    if not found:
        return []
    async with deps.pool.connection() as conn:
        return await store.pair_similarities(conn, user_id, found)


def _slot_conflicts(
    edges: list[store.FactRow], owed: list[store.OwedText]
) -> tuple[list[tuple[int, int]], dict[int, frozenset[str]]]:
    facts = [(e.memory_id, graph.Relation(e.subject, e.predicate, e.object)) for e in edges]
    for memory in owed:
        facts += [(memory.memory_id, r) for r in graph.extract(memory.text)]
    tags = {e.memory_id: frozenset(e.tags) for e in edges}
    tags.update((m.memory_id, frozenset(m.tags)) for m in owed)
    return [(c.first, c.second) for c in graph.conflicts(facts)], tags


def _relations_first(
    clusters: list[Cluster], related: list[tuple[int, int, float]]
) -> tuple[list[Cluster], dict[tuple[int, ...], str]]:
    """Groups holding a relation conflict first (``reason: relation``), then the others.

    Each part keeps the clusters' order (strongest pair first). A relation conflict
    is the scan's surest signal, so ``max_groups`` never cuts one for a similarity group.
    """
    in_relation = {a for a, _b, _s in related}
    reasons = {
        c.ids: "relation" if in_relation.intersection(c.ids) else "similarity" for c in clusters
    }
    ordered = [c for c in clusters if reasons[c.ids] == "relation"]
    ordered += [c for c in clusters if reasons[c.ids] == "similarity"]
    return ordered, reasons


async def qualifying_pairs(
    deps: Deps,
    user_id: int,
    *,
    threshold: float,
    shared_tag: bool,
    in_memory_limit: int = IN_MEMORY_LIMIT,
) -> list[tuple[int, int, float]]:
    """Every ``(id, id, cosine)`` pair from the active rows' top-10 neighbours that qualifies."""
    async with deps.pool.connection() as conn:
        count = await store.active_count(conn, user_id)
        if count <= in_memory_limit:
            found = await store.active_vectors(conn, user_id)
    if count > in_memory_limit:
        return await _pairs_by_index(deps, user_id, threshold=threshold, shared_tag=shared_tag)
    return await asyncio.to_thread(_pairs_in_memory, found, threshold, shared_tag)


def _pairs_in_memory(
    found: store.ActiveVectors, threshold: float, shared_tag: bool
) -> list[tuple[int, int, float]]:
    if len(found.ids) < 2:
        return []
    # Conflicts need a shared tag, so untagged rows never look (they still count as neighbours).
    probe = np.array([bool(t) for t in found.tags]) if shared_tag else None
    rows, cols, sims = knn.neighbour_pairs(
        found.vectors, k=NEIGHBOURS, min_similarity=threshold, probe=probe
    )
    # A pair found from both ends once, with its (identical) similarity.
    low, high = np.minimum(rows, cols), np.maximum(rows, cols)
    _, first = np.unique(low * len(found.ids) + high, return_index=True)
    low, high, sims = low[first], high[first], sims[first]
    ids = np.asarray(found.ids, dtype=np.int64)
    pairs = zip(ids[low].tolist(), ids[high].tolist(), sims.tolist(), strict=True)
    if not shared_tag:
        return list(pairs)
    tags = [frozenset(t) for t in found.tags]
    return [
        p for p, a, b in zip(pairs, low.tolist(), high.tolist(), strict=True) if tags[a] & tags[b]
    ]


async def _pairs_by_index(
    deps: Deps, user_id: int, *, threshold: float, shared_tag: bool
) -> list[tuple[int, int, float]]:
    async with deps.pool.connection() as conn:
        ids = await store.active_ids(conn, user_id, tagged_only=shared_tag)
    batches = [ids[i : i + PROBE_BATCH] for i in range(0, len(ids), PROBE_BATCH)]
    gate = asyncio.Semaphore(SCAN_CONNECTIONS)

    async def probe(batch: list[int]) -> list[tuple[int, int, float]]:
        async with gate, deps.pool.connection() as conn, conn.transaction():
            await store.set_scan_search_width(conn)
            return await store.neighbour_pairs(
                conn, user_id, batch, k=NEIGHBOURS, min_similarity=threshold, shared_tag=shared_tag
            )

    results = await asyncio.gather(*(probe(b) for b in batches), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return [pair for part in results if not isinstance(part, BaseException) for pair in part]


def _group(cluster: Cluster, rows: dict[int, Any]) -> dict[str, Any] | None:
    # A row forgotten between the pair search and this read leaves its group.
    ids = [i for i in cluster.ids[:MAX_GROUP_MEMBERS] if i in rows]
    if len(ids) < 2:
        return None
    group: dict[str, Any] = {
        "ids": ids,
        "max_similarity": round(cluster.max_similarity, 4),
        "pair_count": cluster.pair_count,
        "memories": [match_shape(rows[i]) for i in ids],
    }
    if len(cluster.ids) > MAX_GROUP_MEMBERS:
        group["size"] = len(cluster.ids)
        group["truncated"] = True
    return group
