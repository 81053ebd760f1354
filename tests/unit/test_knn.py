"""In-memory all-nearest-neighbours for the cleanup scans: exact when small, high recall when large."""

from __future__ import annotations

import numpy as np
import pytest

from memory.rules import knn


def unit_rows(a: np.ndarray) -> np.ndarray:
    return (a / np.linalg.norm(a, axis=1, keepdims=True)).astype(np.float32)


def pairs(vectors: np.ndarray, **kw) -> list[tuple[int, int, float]]:
    rows, cols, sims = knn.neighbour_pairs(vectors, **kw)
    assert rows.dtype == cols.dtype == np.int64 and sims.dtype == np.float32
    return list(zip(rows.tolist(), cols.tolist(), sims.tolist(), strict=True))


def brute_force(
    vectors: np.ndarray, k: int, t: float, probe: np.ndarray | None = None
) -> set[tuple[int, int]]:
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    out = set()
    for i in range(len(vectors)):
        if probe is not None and not probe[i]:
            continue
        top = np.argsort(-sims[i], kind="stable")[:k]
        out |= {(i, int(j)) for j in top if sims[i, j] >= t}
    return out


def clustered(n: int, dims: int, centres: int, spread: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centres, dims))
    return unit_rows(c[rng.integers(0, centres, n)] + spread * rng.normal(size=(n, dims)))


@pytest.mark.parametrize(
    ("n", "k", "t"), [(2, 10, 0.0), (50, 3, 0.2), (300, 10, 0.5), (2000, 10, 0.9)]
)
def test_small_stores_are_exact(n: int, k: int, t: float) -> None:
    vectors = clustered(n, 32, 20, 0.3, seed=n)
    got = {(a, b) for a, b, _ in pairs(vectors, k=k, min_similarity=t)}
    # Ties at the k-th place may be broken either way; there are none in random data.
    assert got == brute_force(vectors, k, t)


def test_similarities_are_cosines_and_never_self() -> None:
    vectors = clustered(200, 16, 5, 0.2, seed=1)
    for a, b, s in pairs(vectors, k=5, min_similarity=0.0):
        assert a != b
        assert s == pytest.approx(float(vectors[a] @ vectors[b]), abs=1e-5)


def test_probe_limits_who_looks_but_not_who_is_found() -> None:
    vectors = clustered(400, 16, 8, 0.3, seed=2)
    probe = np.arange(400) % 3 == 0
    got = {(a, b) for a, b, _ in pairs(vectors, k=5, min_similarity=0.3, probe=probe)}
    assert got == brute_force(vectors, 5, 0.3, probe)
    assert all(probe[a] for a, _ in got) and any(not probe[b] for _, b in got)


def test_identical_vectors_pair_up() -> None:
    v = unit_rows(np.random.default_rng(4).normal(size=(5, 8)))
    vectors = np.concatenate([v, v])
    got = {(a, b) for a, b, s in pairs(vectors, k=1, min_similarity=0.999)}
    assert got == {(i, i + 5) for i in range(5)} | {(i + 5, i) for i in range(5)}


def test_large_stores_keep_high_recall_of_close_pairs() -> None:
    """Above the exact size the search is approximate: close pairs must still be found."""
    n = knn.ROWS_PER_LIST * (knn.PROBE_LISTS + 4)
    vectors = clustered(n, 48, 300, 0.35, seed=9)
    got = {(a, b) for a, b, _ in pairs(vectors, k=10, min_similarity=0.8)}
    sample = np.random.default_rng(1).choice(n, 300, replace=False)
    probe = np.zeros(n, dtype=bool)
    probe[sample] = True
    want = brute_force(vectors, 10, 0.8, probe)
    assert want, "the data should have close pairs"
    recall = len(want & got) / len(want)
    assert recall >= 0.95, recall
    assert pairs(vectors, k=10, min_similarity=0.8) == pairs(vectors, k=10, min_similarity=0.8), (
        "deterministic"
    )


def test_ties_at_the_kth_place_keep_exactly_k() -> None:
    base = unit_rows(np.random.default_rng(6).normal(size=(1, 8)))
    vectors = np.repeat(base, 6, axis=0)  # every pair ties at cosine 1
    found = pairs(vectors, k=2, min_similarity=0.5)
    assert len(found) == 12 and all(sum(1 for a, _, _ in found if a == i) == 2 for i in range(6))


def test_nothing_to_compare() -> None:
    assert pairs(np.zeros((0, 4), dtype=np.float32), k=3, min_similarity=0.5) == []
    assert pairs(unit_rows(np.ones((1, 4))), k=3, min_similarity=0.5) == []
