"""``export_memories`` and ``ownsona export`` / ``ownsona import`` of one user, on Citus.

Alice and Bob live on different workers. Alice's export holds her memories only; the
command's file, imported into another Citus database, gives her the same memories
under the same ids, and recall finds them there.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from config.settings import Settings
from memory.deps import Deps
from scripts.cluster.citus_nodes import CitusCluster
from storage.migrate import migrate
from storage.pool import make_pool
from tests.conftest import TEST_DIMENSIONS
from tests.ops.test_backup import ownsona
from tests.service.helpers import call

ALICE = ["My sister Ana lives in Porto.", "I am allergic to peanuts."]
BOB = ["My son Colby lives in Los Angeles."]


@pytest.fixture
def restored(citus: CitusCluster) -> Iterator[str]:
    yield citus.create_database("restored")
    for node in citus.nodes:
        node.sql("DROP DATABASE IF EXISTS restored WITH (FORCE)", database="postgres")


async def test_one_users_export_and_import_across_citus_databases(
    deps, dsn: str, alice: int, bob: int, restored: str, embedder: object, tmp_path: Path
) -> None:
    ids = {t: (await call(deps, alice, "remember", text=t))["memory_id"] for t in ALICE}
    for text in BOB:
        await call(deps, bob, "remember", text=text)

    exported = await call(deps, alice, "export_memories")
    assert sorted(m["text"] for m in exported["memories"]) == sorted(ALICE)

    backup = tmp_path / "alice.jsonl"
    done = await asyncio.to_thread(
        ownsona, dsn, "export", "--user", "alice", "--output", str(backup)
    )
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in backup.read_text().splitlines()[1:]]
    assert sorted(r["text"] for r in records) == sorted(ALICE)

    await migrate(restored, dimensions=TEST_DIMENSIONS)
    done = await asyncio.to_thread(ownsona, restored, "import", str(backup))
    assert done.returncode == 0, done.stderr
    pool = make_pool(restored, min_size=1, max_size=2, name="restored")
    await pool.open(wait=True)
    try:
        target = Deps(
            settings=Settings(public_url="http://127.0.0.1:8000"), pool=pool, embedder=embedder
        )
        async with pool.connection() as conn:
            cur = await conn.execute("SELECT id FROM users WHERE username = 'alice'")
            row = await cur.fetchone()
        assert row is not None
        for text, memory_id in ids.items():
            got = await call(target, int(row[0]), "get_memory", id=memory_id)
            assert got["memory"]["text"] == text
        found = await call(target, int(row[0]), "recall", query="where does my sister live?")
        assert found["matches"][0]["id"] == ids[ALICE[0]]
    finally:
        await pool.close()
