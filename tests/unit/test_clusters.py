"""Union-find clustering of similar pairs: pure, table-driven."""

from __future__ import annotations

import random

import pytest

from memory.rules.clusters import Cluster, DisjointSet, cluster_pairs, unique_pairs

CASES = [
    ("no pairs", [], []),
    ("one pair", [(4, 5, 0.98)], [Cluster((4, 5), 0.98, 1)]),
    ("both directions count once", [(4, 5, 0.98), (5, 4, 0.98)], [Cluster((4, 5), 0.98, 1)]),
    (
        "a direction seen lower keeps the higher",
        [(4, 5, 0.93), (5, 4, 0.95)],
        [Cluster((4, 5), 0.95, 1)],
    ),
    ("self pairs are ignored", [(3, 3, 1.0)], []),
    (
        "transitive: a~b, b~c is one group",
        [(1, 2, 0.93), (2, 3, 0.94)],
        [Cluster((1, 2, 3), 0.94, 2)],
    ),
    (
        "strongest group first",
        [(1, 2, 0.93), (7, 8, 0.99), (3, 4, 0.95)],
        [Cluster((7, 8), 0.99, 1), Cluster((3, 4), 0.95, 1), Cluster((1, 2), 0.93, 1)],
    ),
    (
        "a dense triangle counts three pairs",
        [(1, 2, 0.95), (2, 3, 0.95), (1, 3, 0.96)],
        [Cluster((1, 2, 3), 0.96, 3)],
    ),
    (
        "ties go to the denser group, then the lower id",
        [(10, 11, 0.95), (1, 2, 0.95), (20, 21, 0.95), (21, 22, 0.9)],
        [Cluster((20, 21, 22), 0.95, 2), Cluster((1, 2), 0.95, 1), Cluster((10, 11), 0.95, 1)],
    ),
    (
        "two chains joined by one pair become one",
        [(1, 2, 0.93), (3, 4, 0.93), (2, 3, 0.97)],
        [Cluster((1, 2, 3, 4), 0.97, 3)],
    ),
]


@pytest.mark.parametrize(("name", "pairs", "expected"), CASES, ids=[c[0] for c in CASES])
def test_cluster_pairs(
    name: str, pairs: list[tuple[int, int, float]], expected: list[Cluster]
) -> None:
    assert cluster_pairs(pairs) == expected


def test_unique_pairs_orders_ids() -> None:
    assert unique_pairs([(9, 2, 0.5), (2, 9, 0.4), (3, 1, 0.7)]) == {(2, 9): 0.5, (1, 3): 0.7}


def test_disjoint_set_union_and_find() -> None:
    forest = DisjointSet()
    assert forest.find(1) == 1
    root = forest.union(1, 2)
    assert forest.find(1) == forest.find(2) == root
    forest.union(3, 4)
    assert forest.find(3) != forest.find(1)
    forest.union(4, 2)
    assert len({forest.find(i) for i in (1, 2, 3, 4)}) == 1


def test_matches_a_naive_component_search() -> None:
    """Against a plain BFS over random graphs: same components, same pair counts."""
    rng = random.Random(5)
    for _ in range(50):
        pairs = [
            (rng.randrange(40), rng.randrange(40), round(rng.uniform(0.9, 1.0), 3))
            for _ in range(30)
        ]
        edges = unique_pairs(pairs)
        adjacency: dict[int, set[int]] = {}
        for a, b in edges:
            adjacency.setdefault(a, set()).add(b)
            adjacency.setdefault(b, set()).add(a)
        components: list[set[int]] = []
        seen: set[int] = set()
        for start in sorted(adjacency):
            if start in seen:
                continue
            stack, comp = [start], set()
            while stack:
                node = stack.pop()
                if node in comp:
                    continue
                comp.add(node)
                stack.extend(adjacency[node] - comp)
            seen |= comp
            components.append(comp)
        clusters = cluster_pairs(pairs)
        assert sorted(tuple(sorted(c)) for c in components) == sorted(c.ids for c in clusters)
        for c in clusters:
            inside = {k: v for k, v in edges.items() if k[0] in c.ids}
            assert c.pair_count == len(inside)
            assert c.max_similarity == max(inside.values())
        strengths = [c.max_similarity for c in clusters]
        assert strengths == sorted(strengths, reverse=True)


def test_large_input_is_fast() -> None:
    import time

    rng = random.Random(1)
    pairs = [(rng.randrange(100_000), rng.randrange(100_000), rng.random()) for _ in range(300_000)]
    started = time.perf_counter()
    clusters = cluster_pairs(pairs)
    assert clusters and time.perf_counter() - started < 10
