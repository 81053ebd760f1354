"""Nearest-row searches in a store many users share (issue 16).

A small user's recall and write-time near-duplicate probes compare the query with
every row of theirs, so they return exactly the nearest rows however many of other
users' rows lie nearer the query. In a large store a filtered HNSW scan gives up
after ``hnsw.max_scan_tuples`` visited rows; the tests lower that budget so a few
thousand rows stand for a million. A user above the switch still gets the HNSW
index and its near-exact answers.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import psycopg
import pytest

from storage import memories as store
from storage.memory_sql import EXACT_SEARCH_MAX_ROWS
from storage.rows import ScoredMemoryRow

from ..conftest import TEST_DIMENSIONS
from .vectors import copy_rows, seed, unit

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

    async def hybrid(conn: Any) -> list[ScoredMemoryRow]:
        # Recall reads the user's size with the query's terms and sends the one branch.
        sized = await store.query_term_stats(conn, alice, "")
        assert sized.exact
        return await store.search_hybrid(conn, alice, q, candidates=10, exact=sized.exact)

    found_hybrid = await _on_budget(pool, hybrid)
    assert sorted(c.row.id for c in found_hybrid) == sorted(want)

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


def _seed_crowd(dsn: str, users: int, rows_each: int, rng: np.random.Generator) -> None:
    """``users`` new accounts of ``rows_each`` random rows, in one COPY, then ANALYZE."""
    with psycopg.connect(dsn) as conn:
        ids = [
            int(r[0])
            for r in conn.execute(
                "INSERT INTO users (username, password_hash)"
                " SELECT 'crowd' || n, 'x' FROM generate_series(1, %s) n RETURNING id",
                (users,),
            ).fetchall()
        ]
        vectors = unit(rng.normal(size=(users * rows_each, TEST_DIMENSIONS)))
        copy_rows(conn, [ids[i // rows_each] for i in range(len(vectors))], vectors, "crowd")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE memories")


def _plan_nodes(logged: str) -> tuple[list[str], str]:
    """An auto_explain record's plan: its nodes (what reads what, how) and its whole text."""
    plan = logged.split("Query Parameters:", 1)[1].split("\n", 1)[1]
    nodes = [
        re.sub(r"\s*\(cost=.*", "", line).strip() for line in plan.splitlines() if "cost=" in line
    ]
    return nodes, plan


async def test_a_large_users_prepared_search_keeps_the_users_plan(clean_db, pool, bob):
    """Recall's search runs prepared, on a plan PostgreSQL keeps: it must be the user's.

    Among 200 users of 5 rows, a plan of ``user_id = $1`` is one for a user of 30
    rows: the lexical side read all of a large user's rows through the
    ``user_id`` btree to find its few ids (``memory_sql.for_user``). Forced
    generic here, the plan a prepared statement settles on, and compared with the
    first call's, planned with the values.
    """
    rng = np.random.default_rng(18)
    ids = seed(clean_db, bob, unit(rng.normal(size=(EXACT_SEARCH_MAX_ROWS + 1, TEST_DIMENSIONS))))
    _seed_crowd(clean_db, 200, 5, rng)
    q = unit(rng.normal(size=TEST_DIMENSIONS))
    logged: list[str] = []

    def note(diagnostic: Any) -> None:
        logged.append(diagnostic.message_primary or "")

    async with pool.connection() as conn:
        sized = await store.query_term_stats(conn, bob, "row")
        assert not sized.exact
        conn.add_notice_handler(note)
        try:
            async with conn.transaction():
                await conn.execute("LOAD 'auto_explain'")
                await conn.execute("SET LOCAL auto_explain.log_min_duration = 0")
                await conn.execute("SET LOCAL auto_explain.log_level = notice")
                for run in range(8):  # psycopg prepares a statement on its 5th run
                    if run == 1:  # the first is planned with the values, the others not
                        await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
                    found = await store.search_hybrid(
                        conn,
                        bob,
                        q,
                        candidates=10,
                        exact=False,
                        terms=[("row", 1.0)],
                        lexical_ids=ids[:5],
                    )
        finally:
            conn.remove_notice_handler(note)
    assert {c.row.id for c in found} >= set(ids[:5])
    searches = [record for record in logged if "WITH picked" in record]
    (custom, with_values), (generic, without) = _plan_nodes(searches[0]), _plan_nodes(searches[-1])
    parameter = re.compile(r"<=> \$\d")
    assert parameter.search(without) and not parameter.search(with_values)
    # Fetching each picked row by its id names the user too (Citus routes by it): a
    # lookup of one row through either unique key, (id) or (user_id, id), is the same
    # plan; which one PostgreSQL takes follows a cost tie, not the user's size.
    same_lookup = re.compile(r"memories_user_id_id_key\b")
    assert [same_lookup.sub("memories_pkey", n) for n in generic] == [
        same_lookup.sub("memories_pkey", n) for n in custom
    ]
