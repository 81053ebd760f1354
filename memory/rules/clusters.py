"""Clusters of similar memories: union-find over qualifying pairs (SUPPLEMENT §5). Pure.

``find_near_duplicates`` and ``find_conflicts`` find pairs of rows that are
similar enough; a cluster is a connected component of those pairs, so rows
that are only transitively similar (a~b, b~c) land in one group.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Cluster:
    """One connected component of qualifying pairs."""

    #: Member ids, ascending.
    ids: tuple[int, ...]
    #: The strongest pair's similarity.
    max_similarity: float
    #: Distinct qualifying pairs inside the cluster (at least 1).
    pair_count: int


class DisjointSet:
    """Union-find with path halving and union by size."""

    def __init__(self) -> None:
        self._parent: dict[int, int] = {}
        self._size: dict[int, int] = {}

    def find(self, x: int) -> int:
        parent = self._parent
        if x not in parent:
            parent[x] = x
            self._size[x] = 1
            return x
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: int, b: int) -> int:
        """Join the sets of ``a`` and ``b``; return the root of the joined set."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return ra
        if self._size[ra] < self._size[rb]:
            ra, rb = rb, ra
        self._parent[rb] = ra
        self._size[ra] += self._size[rb]
        return ra


def unique_pairs(pairs: Iterable[tuple[int, int, float]]) -> dict[tuple[int, int], float]:
    """Pairs keyed ``(low id, high id)``; a pair seen twice keeps its higher similarity."""
    best: dict[tuple[int, int], float] = {}
    for a, b, similarity in pairs:
        if a == b:
            continue
        key = (a, b) if a < b else (b, a)
        if similarity > best.get(key, float("-inf")):
            best[key] = similarity
    return best


def cluster_pairs(pairs: Iterable[tuple[int, int, float]]) -> list[Cluster]:
    """The connected components of ``(id, id, similarity)`` pairs, strongest first.

    A pair reported in both directions counts once. Ties on the strongest
    similarity go to the denser cluster, then to the one with the lowest id,
    so the order is deterministic.
    """
    best = unique_pairs(pairs)
    forest = DisjointSet()
    for a, b in best:
        forest.union(a, b)
    members: dict[int, list[int]] = {}
    strongest: dict[int, float] = {}
    counts: dict[int, int] = {}
    for (a, _b), similarity in best.items():
        root = forest.find(a)
        counts[root] = counts.get(root, 0) + 1
        if similarity > strongest.get(root, float("-inf")):
            strongest[root] = similarity
    for node in {n for pair in best for n in pair}:
        members.setdefault(forest.find(node), []).append(node)
    clusters = [
        Cluster(ids=tuple(sorted(ids)), max_similarity=strongest[root], pair_count=counts[root])
        for root, ids in members.items()
    ]
    clusters.sort(key=lambda c: (-c.max_similarity, -c.pair_count, c.ids[0]))
    return clusters
