"""Nearest-row searches in a store many users share (issue 16).

A small user's recall and write-time near-duplicate probes compare the query with
every row of theirs, so they return exactly the nearest rows however many of other
users' rows lie nearer the query. In a large store a filtered HNSW scan gives up
after ``hnsw.max_scan_tuples`` visited rows; the tests lower that budget so a few
thousand rows stand for a million. A user above the switch still gets the HNSW
index and its near-exact answers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from storage import memories as store
from storage.memory_sql import EXACT_SEARCH_MAX_ROWS

from ..conftest import TEST_DIMENSIONS
from .vectors import seed, unit

#: A scan budget the crowd of other users' rows below exhausts.
_SCAN_BUDGET = 1000


def _exact(ids: list[int], vectors: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    order = np.argsort(-(vectors @ q), kind="stable")[:k]
    return [ids[i] for i in order]


@pytest.fixture
def crowded(clean_db: str, alice: int, bob: int) -> dict[str, Any]:
    """Alice: 40 rows loosely around the query. Bob: 3,000 rows nearer to it than any of hers."""
    rng = np.random.default_rng(16)
    q = unit(rng.normal(size=TEST_DIMENSIONS))
    hers = unit(q + rng.normal(scale=0.08, size=(40, TEST_DIMENSIONS)))
    his = unit(q + rng.normal(scale=0.02, size=(3000, TEST_DIMENSIONS)))
    assert float((his @ q).min()) > float((hers @ q).max())
    alice_ids = seed(clean_db, alice, hers, "alice")
    seed(clean_db, bob, his, "bob")
    return {"q": q, "ids": alice_ids, "vectors": hers}


async def _on_budget(pool: Any, work: Any) -> Any:
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(f"SET LOCAL hnsw.max_scan_tuples = {_SCAN_BUDGET}")
        return await work(conn)


async def test_small_users_recall_is_exact_among_a_crowd(pool, alice, crowded):
    q, ids, vectors = crowded["q"], crowded["ids"], crowded["vectors"]
    want = _exact(ids, vectors, q, 10)

    found = await _on_budget(
        pool, lambda conn: store.search_by_vector(conn, alice, q, candidates=10)
    )
    assert [s.row.id for s in found] == want

    hybrid = await _on_budget(pool, lambda conn: store.search_hybrid(conn, alice, q, candidates=10))
    assert sorted(c.scored.row.id for c in hybrid) == sorted(want)

    tagged = await _on_budget(
        pool, lambda conn: store.search_by_vector(conn, alice, q, candidates=10, tags=["other"])
    )
    assert tagged == []


async def test_small_users_near_duplicate_probe_is_exact_among_a_crowd(pool, alice, crowded):
    q, ids, vectors = crowded["q"], crowded["ids"], crowded["vectors"]
    probes = [q, vectors[7]]
    found = await _on_budget(
        pool, lambda conn: store.nearest_active(conn, alice, probes, k=5, min_score=-1.0)
    )
    for probe, v in enumerate(probes):
        assert [n.id for n in found if n.probe == probe] == _exact(ids, vectors, v, 5)
    assert found[5].id == ids[7] and found[5].score == pytest.approx(1.0, abs=1e-5)


async def test_forgotten_rows_stay_out_of_the_exact_search(pool, alice, crowded):
    q, ids, vectors = crowded["q"], crowded["ids"], crowded["vectors"]
    nearest = _exact(ids, vectors, q, 1)[0]
    async with pool.connection() as conn:
        await store.soft_delete(conn, alice, [nearest], reason="test", replaced_by_id=None)
        found = await store.search_by_vector(conn, alice, q, candidates=5)
    assert nearest not in [s.row.id for s in found]
    assert [s.row.id for s in found] == [i for i in _exact(ids, vectors, q, 6) if i != nearest]


async def test_a_large_user_gets_the_nearest_rows_through_the_index(clean_db, pool, alice, bob):
    rng = np.random.default_rng(17)
    vectors = unit(rng.normal(size=(EXACT_SEARCH_MAX_ROWS + 1, TEST_DIMENSIONS)))
    ids = seed(clean_db, bob, vectors, "bob")
    seed(clean_db, alice, unit(rng.normal(size=(20, TEST_DIMENSIONS))), "alice")
    q = unit(vectors[123] + rng.normal(scale=0.05, size=TEST_DIMENSIONS))
    async with pool.connection() as conn:
        found = await store.search_by_vector(conn, bob, q, candidates=40)
    top = [s.row.id for s in found[:10]]
    assert top[0] == ids[123]
    assert len(set(top) & set(_exact(ids, vectors, q, 10))) >= 9
