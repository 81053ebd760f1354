"""``ownsona migrate`` on a Citus coordinator: every table on its side, again and again.

The session's database was migrated by the fixture (``dsn``): here, that migrating it
again places nothing and changes nothing, that a table in neither list stays local
(and so fails the side check), and that pgvector's recall settings reach the workers,
where the scans run: a filtered search of a large user returns a full page.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from storage import citus_layout
from storage.citus_layout import apply_citus_layout
from storage.memory_search import search_by_vector
from storage.migrate import migrate
from storage.pool import HNSW_EF_SEARCH, make_pool
from tests.conftest import TEST_DIMENSIONS, make_user


def _sides(dsn: str) -> dict[str, str]:
    with psycopg.connect(dsn) as conn:
        return dict(
            conn.execute(
                "SELECT c.relname::text, coalesce(t.citus_table_type, 'none')"
                " FROM pg_class c LEFT JOIN citus_tables t ON t.table_name = c.oid"
                " WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')"
            ).fetchall()
        )


async def test_migrating_again_places_nothing_and_changes_nothing(dsn: str) -> None:
    before = _sides(dsn)
    assert await migrate(dsn, dimensions=TEST_DIMENSIONS) == []
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        assert await apply_citus_layout(conn) == []
    assert _sides(dsn) == before
    assert set(before.values()) == {"distributed", "reference"}


async def test_a_table_in_neither_list_stays_local_until_it_takes_a_side(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE stray_notes (user_id bigint NOT NULL, note text)")
    try:
        await migrate(dsn, dimensions=TEST_DIMENSIONS)
        assert _sides(dsn)["stray_notes"] == "none"  # the side check names it
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DROP TABLE stray_notes")


def test_the_layout_sets_the_pools_ef_search() -> None:
    assert citus_layout.HNSW_EF_SEARCH == HNSW_EF_SEARCH


@pytest.fixture
def large_user(clean_db: str) -> tuple[int, Any]:
    """1,500 memories of one user, 1 in 25 tagged ``rare``, whose term totals make it a
    user searched through the HNSW index (``memory_sql.USER_ROWS`` above the exact bound)."""
    user = make_user(clean_db, "large")
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(1500, TEST_DIMENSIONS)).astype(np.float32)
    with psycopg.connect(clean_db, autocommit=True) as conn:
        register_vector(conn)
        with conn.cursor().copy(
            "COPY memories (user_id, text, normalized_text, embedding,"
            " embedding_provider, embedding_model, tags) FROM STDIN"
        ) as copy:
            for i, vector in enumerate(vectors):
                tags = ["rare"] if i % 25 == 0 else []
                copy.write_row((user, f"m{i}", f"m{i}", vector, "test", "test", tags))
        conn.execute(
            "INSERT INTO memory_term_totals (user_id, docs) VALUES (%s, 6000)"
            " ON CONFLICT (user_id) DO UPDATE SET docs = 6000",
            (user,),
        )
    return user, rng.normal(size=TEST_DIMENSIONS).astype(np.float32)


async def test_a_filtered_search_of_a_large_user_returns_a_full_page(
    dsn: str, large_user: tuple[int, Any]
) -> None:
    user, query = large_user
    pool = make_pool(dsn, min_size=1, max_size=1, name="citus-ef-search")
    await pool.open(wait=True)
    try:
        async with pool.connection() as conn:
            found = await search_by_vector(conn, user, query, candidates=20, tags=["rare"])
    finally:
        await pool.close()
    assert len(found) == 20
    assert all("rare" in scored.row.tags for scored in found)


async def test_the_recall_settings_are_those_of_the_worker_that_scans(
    dsn: str, large_user: tuple[int, Any]
) -> None:
    """The pool sets them per session on the coordinator; a worker's scan would run with
    pgvector's defaults (ef_search 40, no iterative scan) and come back short for a
    filtered search of a large user. Read where the user's shard is scanned."""
    user, _ = large_user
    pool = make_pool(dsn, min_size=1, max_size=1, name="citus-settings")
    await pool.open(wait=True)
    try:
        async with pool.connection() as conn:
            cur = await conn.execute(
                "SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')"
                " FROM memories WHERE user_id = %s LIMIT 1",
                (user,),
            )
            on_worker = await cur.fetchone()
    finally:
        await pool.close()
    assert on_worker == (str(HNSW_EF_SEARCH), "relaxed_order")
