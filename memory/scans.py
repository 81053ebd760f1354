"""``find_near_duplicates`` and ``find_conflicts``: read-only cleanup diagnostics.

SUPPLEMENT §5 and the tools chapter: candidate pairs come from each active
row's top-10 neighbours, a pair qualifies at ``threshold`` or above (and, for
conflicts, when its two rows share a tag), and groups are the connected
components of qualifying pairs (union-find), strongest first.

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

from memory.rules import knn
from memory.rules.clusters import Cluster, cluster_pairs
from storage import scans as store

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
#: Members listed per group; a larger group (a low threshold on a big store) is cut, flagged.
MAX_GROUP_MEMBERS = 200


async def find_near_duplicates(
    deps: Deps, user_id: int, command: FindNearDuplicates, **_: Any
) -> dict[str, Any]:
    return await _scan(deps, user_id, command)


async def find_conflicts(
    deps: Deps, user_id: int, command: FindConflicts, **_: Any
) -> dict[str, Any]:
    return await _scan(deps, user_id, command)


async def _scan(deps: Deps, user_id: int, command: Scan) -> dict[str, Any]:
    threshold, max_groups, shared_tag = command.threshold, command.max_groups, command.SHARED_TAG
    pairs = await qualifying_pairs(deps, user_id, threshold=threshold, shared_tag=shared_tag)
    clusters = (await asyncio.to_thread(cluster_pairs, pairs))[:max_groups]
    async with deps.pool.connection() as conn:
        rows = await store.rows_by_ids(
            conn, user_id, [i for c in clusters for i in c.ids[:MAX_GROUP_MEMBERS]]
        )
    groups = [g for g in (_group(c, rows) for c in clusters) if g is not None]
    return {
        "ok": True,
        "threshold": threshold,
        "groups": groups,
        "summary": {"groups": len(groups), "pairs": sum(g["pair_count"] for g in groups)},
    }


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
