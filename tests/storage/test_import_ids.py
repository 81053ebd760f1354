"""An import after a failover draws fresh ids on the new timeline (issue 33, finding 8).

A restored memory whose id is taken gets a fresh one. Drawn with a plain
``nextval`` after an asynchronous failover, it would be an id the old primary
had already handed out to an acknowledged, then lost, write (migration 0019:
ids are never reused). Drawn through ``ownsona_next_id``, the first draw on
the new timeline moves the sequence past everything the old one could reach.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from memory.backup import export_store, import_store
from storage.pool import make_pool
from tests.tool_calls import USE_CASES

#: Ids the old primary handed out to writes this server never saw (the lost tail).
LOST = 3


async def test_an_import_after_a_timeline_change_reuses_no_id(
    deps, clean_db, embedder, alice, bob, tmp_path: Path
):
    stored = await USE_CASES["remember"](
        deps, alice, {"text": "My sister Ana lives in Porto."}, idempotency_key=None
    )
    taken = stored["memory_id"]
    path = tmp_path / "alice.jsonl"
    with path.open("w", encoding="utf-8") as out:
        await export_store(deps.pool, out.write, username="alice", keyring=deps.keyring)
    # The failover: the old primary handed out the next LOST ids to writes it acknowledged
    # and then lost; this server (the promoted standby) never saw them, and now writes on a
    # timeline its allocator has not recorded.
    lost = set(range(taken + 1, taken + 1 + LOST))
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("UPDATE store_meta SET value = '999' WHERE key = 'id_timeline'")
    # Fresh sessions, as after a promotion (a session caches the timeline it recorded).
    pool = make_pool(clean_db, min_size=1, max_size=2, name="test-import-ids")
    await pool.open(wait=True)
    try:
        # Into bob: the file's id is alice's row, so bob's copy needs a fresh id.
        sealing = deps.keyring if deps.settings.seal_memories else None  # as `ownsona import`
        summary = await import_store(pool, embedder, path, into_user="bob", keyring=sealing)
    finally:
        await pool.close()
    assert summary.inserted == 1 and summary.renumbered == 1
    with psycopg.connect(clean_db) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM memories WHERE user_id = %s", (bob,))]
    assert len(ids) == 1
    assert ids[0] not in lost, f"id {ids[0]} was handed out before the failover"
    assert ids[0] > max(lost)
