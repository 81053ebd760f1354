"""A large user's own HNSW index (issue 16): recall as if they were alone in the store.

A filtered scan of the table-wide index has to step over every other user's rows
near the query; with a budget of visited rows (``hnsw.max_scan_tuples``, lowered
here so a few thousand rows stand for a million) it runs out before reaching a
large user's nearest rows. Their own partial index holds their rows only. The
planner picks it, the smaller of the two indexes that can order by distance, when
the statement is planned with the user's id (the searches run unprepared, or with
the id written in).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql

from memory.own_indexes import keep_own_indexes
from storage import memories as store
from storage import own_indexes
from storage.memory_sql import EXACT_SEARCH_ROWS, M_ACTIVE, for_user, nearest_ids

from ..conftest import TEST_DIMENSIONS, make_user
from .vectors import seed, unit

_SCAN_BUDGET = 1000
#: The test's bound: the large user below holds just over the exact-search switch.
_MIN_ROWS = EXACT_SEARCH_ROWS
#: A bound for the tests of the plan alone (which users, when): fewer rows to seed.
_SMALL_BOUND = 200


def _indexes(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memories'"
            " AND indexname LIKE 'memories_embedding_user_%'"
        ).fetchall()
    return {r[0] for r in rows}


async def _top10(pool: Any, user_id: int, q: np.ndarray, *, prepared: bool = False) -> list[int]:
    """The ids of the nearest-rows subquery every vector search shares (memory_sql).

    ``prepared``: recall's form for a large user (one branch, the user's id written
    in), run until prepared and on its generic plan, the plan a prepared statement keeps.
    """
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(f"SET LOCAL hnsw.max_scan_tuples = {_SCAN_BUDGET}")
        # At a few thousand rows the planner sorts the user's rows by distance itself; in
        # a store of a million it reads an HNSW index, as it must here without sorting.
        await conn.execute("SET LOCAL enable_sort = off")
        if not prepared:
            cur = await conn.execute(
                nearest_ids(distance_to=sql.SQL("%(q)b"), filters=sql.SQL(M_ACTIVE)),
                {"q": q, "user_id": user_id, "k": 10},
                prepare=False,
            )
            return [int(r[0]) for r in await cur.fetchall()]
        await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        query = nearest_ids(
            distance_to=sql.SQL("%(q)b"),
            filters=sql.SQL(M_ACTIVE),
            exact=False,
            values=for_user(user_id=user_id, k=10, exact=False),
        )
        for _ in range(6):  # psycopg prepares a statement on its 5th run
            cur = await conn.execute(query, {"q": q})
        return [int(r[0]) for r in await cur.fetchall()]


@pytest.fixture(autouse=True)
def _drop_own_indexes(clean_db: str) -> Iterator[None]:
    """Own indexes outlive the rows a test deletes; the next test's users reuse the ids."""
    yield
    with psycopg.connect(clean_db, autocommit=True) as conn:
        for name in _indexes(clean_db):
            conn.execute(f"DROP INDEX IF EXISTS {name}")


async def test_a_large_user_in_a_crowd_is_served_by_an_own_index(clean_db, pool, alice, bob):
    rng = np.random.default_rng(18)
    q = unit(rng.normal(size=TEST_DIMENSIONS))
    hers = unit(q + rng.normal(scale=0.08, size=(_MIN_ROWS + 100, TEST_DIMENSIONS)))
    his = unit(q + rng.normal(scale=0.02, size=(3000, TEST_DIMENSIONS)))
    ids = seed(clean_db, alice, hers)
    seed(clean_db, bob, his)  # nearer the query than any of hers; the larger share
    exact = [ids[i] for i in np.argsort(-(hers @ q), kind="stable")[:10]]

    shared = await _top10(pool, alice, q)
    assert len(set(shared) & set(exact)) < 5  # the crowd exhausts the shared index's budget

    done = await keep_own_indexes(pool, min_rows=_MIN_ROWS)
    assert done.locked and done.built == [alice] and done.dropped == []  # bob holds > 1/2
    assert _indexes(clean_db) == {own_indexes.own_index_name(alice)}
    own = await _top10(pool, alice, q)
    assert len(set(own) & set(exact)) >= 9
    assert len(set(await _top10(pool, alice, q, prepared=True)) & set(exact)) >= 9

    again = await keep_own_indexes(pool, min_rows=_MIN_ROWS)
    assert again.built == [] and again.dropped == []


async def test_the_own_index_goes_when_its_user_shrinks(clean_db, pool, alice, bob):
    rng = np.random.default_rng(19)
    ids = seed(clean_db, alice, unit(rng.normal(size=(_SMALL_BOUND, TEST_DIMENSIONS))))
    seed(clean_db, bob, unit(rng.normal(size=(_SMALL_BOUND + 500, TEST_DIMENSIONS))))
    assert (await keep_own_indexes(pool, min_rows=_SMALL_BOUND)).built == [alice]
    async with pool.connection() as conn:
        # Down to just above half the bound: kept, so a user at the bound does not flap.
        await store.soft_delete(
            conn, alice, ids[: _SMALL_BOUND // 2 - 1], reason="t", replaced_by_id=None
        )
    kept = await keep_own_indexes(pool, min_rows=_SMALL_BOUND)
    assert kept.dropped == [] and own_indexes.own_index_name(alice) in _indexes(clean_db)
    async with pool.connection() as conn:
        await store.soft_delete(
            conn, alice, ids[: _SMALL_BOUND // 2 + 1], reason="t", replaced_by_id=None
        )
    gone = await keep_own_indexes(pool, min_rows=_SMALL_BOUND)
    assert gone.dropped == [own_indexes.own_index_name(alice)]
    assert _indexes(clean_db) == set()


async def test_one_process_at_a_time_keeps_the_indexes(clean_db, pool, alice, bob):
    rng = np.random.default_rng(20)
    seed(clean_db, alice, unit(rng.normal(size=(_SMALL_BOUND, TEST_DIMENSIONS))))
    seed(clean_db, bob, unit(rng.normal(size=(_SMALL_BOUND + 500, TEST_DIMENSIONS))))
    async with pool.connection() as other:
        assert await own_indexes.try_lock_own_indexes(other)
        try:
            busy = await keep_own_indexes(pool, min_rows=_SMALL_BOUND)
        finally:
            await other.execute("SELECT pg_advisory_unlock_all()")
    assert not busy.locked and busy.built == [] and _indexes(clean_db) == set()
    assert (await keep_own_indexes(pool, min_rows=_SMALL_BOUND)).built == [alice]


def _invalid_index(dsn: str, user_id: int) -> None:
    """What an interrupted build leaves: an index of the user's name that is not valid."""
    name = own_indexes.own_index_name(user_id)
    with psycopg.connect(dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UniqueViolation):  # the user has many rows
            conn.execute(
                f"CREATE UNIQUE INDEX CONCURRENTLY {name} ON memories (user_id)"
                f" WHERE user_id = {int(user_id)}"
            )
        row = conn.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", (name,)
        ).fetchone()
    assert row is not None and row[0] is False


async def test_an_interrupted_build_is_built_again_or_dropped(clean_db, pool, alice, bob):
    rng = np.random.default_rng(21)
    seed(clean_db, alice, unit(rng.normal(size=(_SMALL_BOUND, TEST_DIMENSIONS))))
    seed(clean_db, bob, unit(rng.normal(size=(_SMALL_BOUND + 500, TEST_DIMENSIONS))))
    _invalid_index(clean_db, alice)  # alice qualifies: her index is built again
    _invalid_index(clean_db, bob)  # bob holds over half the table: his goes
    done = await keep_own_indexes(pool, min_rows=_SMALL_BOUND)
    assert done.built == [alice] and done.dropped == [own_indexes.own_index_name(bob)]
    with psycopg.connect(clean_db) as conn:
        rows = conn.execute(
            "SELECT c.relname, i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname LIKE 'memories_embedding_user_%'"
        ).fetchall()
    assert len(rows) == 1 and rows[0][0] == own_indexes.own_index_name(alice) and rows[0][1]
    assert "hnsw" in rows[0][2]


async def test_one_failing_build_does_not_keep_the_others_waiting(clean_db, pool, alice, bob):
    carol = make_user(clean_db, "carol")
    rng = np.random.default_rng(22)
    for user in (alice, carol):
        seed(clean_db, user, unit(rng.normal(size=(_SMALL_BOUND, TEST_DIMENSIONS))))
    seed(clean_db, bob, unit(rng.normal(size=(2 * _SMALL_BOUND + 100, TEST_DIMENSIONS))))
    blocker = own_indexes.own_index_name(alice)
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {blocker} (x int)")  # her index's name is taken
    try:
        done = await keep_own_indexes(pool, min_rows=_SMALL_BOUND)
        assert done.failed == [alice] and done.built == [carol]
        assert _indexes(clean_db) == {own_indexes.own_index_name(carol)}
    finally:
        with psycopg.connect(clean_db, autocommit=True) as conn:
            conn.execute(f"DROP TABLE {blocker}")


async def test_only_own_index_names_are_dropped(pool) -> None:
    async with pool.connection() as conn:
        with pytest.raises(ValueError):
            await own_indexes.drop_own_index(conn, "memories_embedding_hnsw")
