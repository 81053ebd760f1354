"""Moving a single-node store onto Citus (docs/scaling.md, "Moving a single-node store"):
``pg_dump`` of the one node, restored into the coordinator, then ``ownsona migrate``,
whose layout step places every table, copying its rows to the shards. Nothing is lost,
every id names the same memory, and new ids continue after the old ones."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from config.settings import Settings
from memory.deps import Deps
from scripts.cluster.citus_nodes import CitusCluster
from storage.migrate import migrate
from storage.pool import make_pool
from tests.citus.test_layout import _sides
from tests.conftest import TEST_DIMENSIONS, make_user
from tests.service.helpers import call

FACTS = [
    "My sister Ana lives in Porto.",
    "I am allergic to peanuts.",
    "My son Colby lives in Los Angeles.",
]


@pytest.fixture
def databases(citus: CitusCluster) -> Iterator[tuple[str, str]]:
    """A plain database (no Citus in it: a single node) and an empty Citus one."""
    citus.coordinator.sql("CREATE DATABASE single_node", database="postgres")
    moved = citus.create_database("moved")
    yield citus.coordinator.dsn("single_node"), moved
    for node in citus.nodes:
        for name in ("single_node", "moved"):
            node.sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", database="postgres")


async def _remember(dsn: str, embedder: object, user: int, facts: list[str]) -> list[int]:
    pool = make_pool(dsn, min_size=1, max_size=2, name="move")
    await pool.open(wait=True)
    try:
        deps = Deps(
            settings=Settings(public_url="http://127.0.0.1:8000"), pool=pool, embedder=embedder
        )
        return [(await call(deps, user, "remember", text=fact))["memory_id"] for fact in facts]
    finally:
        await pool.close()


async def test_a_single_node_store_moves_onto_citus_with_its_ids(
    citus: CitusCluster, databases: tuple[str, str], embedder: object, tmp_path: Path
) -> None:
    single, moved = databases
    await migrate(single, dimensions=TEST_DIMENSIONS)
    alice = make_user(single, "alice")
    ids = await _remember(single, embedder, alice, FACTS)

    dump = tmp_path / "single.sql"
    bin_dir = citus.bin_dir
    subprocess.run(
        [str(bin_dir / "pg_dump"), "--no-owner", "-f", str(dump), "-d", single],
        check=True,
        timeout=120,
    )
    subprocess.run(
        [str(bin_dir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(dump), "-d", moved],
        check=True,
        timeout=300,
        capture_output=True,
    )
    await migrate(moved, dimensions=TEST_DIMENSIONS)
    assert set(_sides(moved).values()) == {"distributed", "reference"}

    pool = make_pool(moved, min_size=1, max_size=2, name="moved")
    await pool.open(wait=True)
    try:
        deps = Deps(
            settings=Settings(public_url="http://127.0.0.1:8000"), pool=pool, embedder=embedder
        )
        for memory_id, fact in zip(ids, FACTS, strict=True):
            assert (await call(deps, alice, "get_memory", id=memory_id))["memory"]["text"] == fact
        found = await call(deps, alice, "recall", query="where does my sister live?")
        assert found["matches"][0]["id"] == ids[0]
        later = (await call(deps, alice, "remember", text="I play the cello."))["memory_id"]
        assert later > max(ids)
    finally:
        await pool.close()
