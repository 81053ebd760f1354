"""The term statistics and the relation outbox, kept by the write statements (issue 32).

After any sequence of writes, ``memory_terms`` and ``memory_term_totals`` equal a
recount from the rows, and ``relation_outbox`` holds what the triggers of
migrations 0002 and 0005 put there: an entry for each memory whose text was
stored (inserted or changed while not forgotten), queued by that write, until a
hard delete; nothing for a memory restored with its edges.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from datetime import datetime
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from memory.backup import export_store, import_store
from memory.deps import Deps
from memory.errors import MemoryServiceError
from storage import terms
from storage.migrate import migrate
from storage.pool import make_pool
from storage.users import delete_account
from tests.conftest import TEST_DIMENSIONS, make_user, truncate_all

from .helpers import call, named_terms, opened_rows, remember_many, sql

#: Few words, so that terms are shared, fall to 0 and come back.
_WORDS = [
    "otter",
    "heron",
    "garden",
    "river",
    "stone",
    "lantern",
    "violin",
    "harbor",
    "maple",
    "copper",
]


#: The lexemes the tests look up by name (a sealed user's terms are keyed hashes).
_NAMED = (*_WORDS, "otter", "heron", "river", "copper")


async def _stats(deps: Any, user: int) -> tuple[int, dict[str, int]]:
    """The user's totals and term counts; keyed terms named by their lexemes (``named_terms``)."""
    total = await sql(
        deps, "SELECT coalesce(max(docs), 0) FROM memory_term_totals WHERE user_id = %s", (user,)
    )
    rows = await sql(deps, "SELECT term, docs FROM memory_terms WHERE user_id = %s", (user,))
    names = await named_terms(deps, user, _NAMED)
    return int(total[0][0]), {names.get(t, t): int(d) for t, d in rows}


async def _recount(deps: Any, user: int) -> tuple[int, dict[str, int]]:
    total = await sql(
        deps, "SELECT count(*) FROM memories WHERE user_id = %s AND deleted_at IS NULL", (user,)
    )
    rows = await sql(
        deps,
        "SELECT t, count(*) FROM memories, unnest(tsvector_to_array(coalesce(sealed_search, text_search))) AS t"
        " WHERE user_id = %s AND deleted_at IS NULL GROUP BY t",
        (user,),
    )
    names = await named_terms(deps, user, _NAMED)
    return int(total[0][0]), {names.get(t, t): int(d) for t, d in rows}


async def _assert_exact(deps: Any, *users: int) -> None:
    for user in users:
        assert await _stats(deps, user) == await _recount(deps, user)


@pytest.fixture(scope="session")
def contracted_dsn(dsn: str) -> str:
    """A second database, migrated, then without the triggers (``terms.DROP_TRIGGERS``).

    What the move to Citus and the release after 0021 leave: the statements alone
    keep the counts and the outbox.
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS ownsona_contracted")
        conn.execute("CREATE DATABASE ownsona_contracted")
    url = make_conninfo(dsn, dbname="ownsona_contracted")
    asyncio.run(migrate(url, dimensions=TEST_DIMENSIONS))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(terms.DROP_TRIGGERS)
        left = conn.execute(
            "SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal"
            " AND tgrelid IN ('memories'::regclass, 'memory_relations'::regclass)"
        ).fetchone()
    assert left == (0,)
    return url


@pytest.fixture(scope="session")
async def contracted_pool(contracted_dsn: str):  # type: ignore[no-untyped-def]
    p = make_pool(contracted_dsn, min_size=1, max_size=8, name="tests-contracted")
    await p.open(wait=True)
    yield p
    await p.close()


@pytest.fixture(params=["migrated", "contracted"])
def store(request, deps, dsn):  # type: ignore[no-untyped-def]
    """(deps, dsn) of the test database as migrated (triggers kept, stepping aside) or contracted."""
    if request.param == "migrated":
        return deps, dsn
    url = request.getfixturevalue("contracted_dsn")
    truncate_all(url)
    pool = request.getfixturevalue("contracted_pool")
    return Deps(
        settings=deps.settings, pool=pool, embedder=deps.embedder, extractor=deps.extractor
    ), url


_Row = tuple[str, datetime, datetime, bool]  # text, created_at, updated_at, counted


async def _rows(deps: Any, user: int) -> dict[int, _Row]:
    """Each row's text (opened if sealed), times and whether it counts."""
    got = await opened_rows(
        deps,
        "SELECT id, user_id, text, tags, text_sealed, tags_sealed, created_at, updated_at,"
        " deleted_at IS NULL AS counted FROM memories WHERE user_id = %s",
        (user,),
    )
    return {r["id"]: (r["text"], r["created_at"], r["updated_at"], r["counted"]) for r in got}


async def _outbox(deps: Any, user: int) -> dict[int, tuple[datetime, Any, int]]:
    got = await sql(
        deps,
        "SELECT memory_id, queued_at, due_at, attempts FROM relation_outbox WHERE user_id = %s",
        (user,),
    )
    return {r[0]: (r[1], r[2], r[3]) for r in got}


class _OutboxModel:
    """What the triggers of 0005 would hold, from the rows each write changed.

    A new row not forgotten: an entry queued at its creation. A row whose text
    changed and is not forgotten: queued again at that write (its ``updated_at``,
    the same transaction's ``now()``). A row gone: no entry. Nothing else moves one.
    """

    def __init__(self) -> None:
        self.rows: dict[int, _Row] = {}
        self.queued: dict[int, datetime] = {}

    def follow(self, rows: dict[int, _Row]) -> None:
        for mid, (text, created, updated, counted) in rows.items():
            before = self.rows.get(mid)
            if before is None:
                if counted:
                    self.queued[mid] = created
            elif before[0] != text and counted:
                self.queued[mid] = updated
        for mid in set(self.rows) - set(rows):
            self.queued.pop(mid, None)
        self.rows = rows


async def _check(deps: Any, user: int, model: _OutboxModel) -> None:
    await _assert_exact(deps, user)
    model.follow(await _rows(deps, user))
    outbox = await _outbox(deps, user)
    assert {m: q for m, (q, _, _) in outbox.items()} == model.queued
    assert all(due is None and attempts == 0 for _, due, attempts in outbox.values())


def _text(rng: random.Random) -> str:
    return " ".join(rng.sample(_WORDS, rng.randint(1, 4))) + f" {rng.randint(0, 30)}."


async def _random_write(deps: Any, user: int, rng: random.Random) -> None:
    """One write of a random kind on random rows of the user's (some forgotten already)."""
    rows = await _rows(deps, user)
    ids = sorted(rows)
    live = [m for m in ids if rows[m][3]]
    kind = rng.choice(
        ["remember", "batch", "supersede", "edit", "retag", "confirm", "reinforce"]
        + ["forget", "forget_batch", "hard"]
    )
    if kind == "remember" or not ids:
        await call(deps, user, "remember", text=_text(rng))
    elif kind == "batch":
        await remember_many(deps, user, [_text(rng) for _ in range(rng.randint(2, 5))])
    elif kind == "supersede" and live:
        await call(deps, user, "remember", text=_text(rng), supersedes=rng.sample(live, 1))
    elif kind == "edit" and live:
        await call(deps, user, "update_memory", id=rng.choice(live), text=_text(rng))
    elif kind == "retag" and live:
        await call(deps, user, "update_memory", id=rng.choice(live), tags=["t"], importance=0.9)
    elif kind == "confirm" and live:
        await call(deps, user, "confirm", id=rng.choice(live))
    elif kind == "reinforce" and live:
        await call(deps, user, "reinforce", memory_ids=rng.sample(live, 1), query=_text(rng))
    elif kind == "forget":
        await call(deps, user, "forget", id=rng.choice(ids))  # forgotten already: metadata only
    elif kind == "forget_batch":
        await call(deps, user, "forget_batch", ids=rng.sample(ids, min(3, len(ids))))
    elif kind == "hard":
        await call(deps, user, "forget", id=rng.choice(ids), hard_delete=True)


@pytest.mark.parametrize("seed", range(3))
async def test_any_sequence_of_writes_keeps_the_counts_and_the_outbox_exact(store, seed):
    deps, url = store
    alice, bob = make_user(url, "alice"), make_user(url, "bob")
    rng = random.Random(seed)
    models = {alice: _OutboxModel(), bob: _OutboxModel()}
    for _ in range(30):
        user = rng.choice([alice, bob])
        await _random_write(deps, user, rng)
        await _check(deps, user, models[user])
    for user, model in models.items():
        await _check(deps, user, model)


async def test_writers_of_one_user_at_once_neither_deadlock_nor_miscount(store):
    """Overlapping supersedes, edits, forgets and batches of one user, and another user's."""
    deps, url = store
    alice, bob = make_user(url, "alice"), make_user(url, "bob")
    shared = await remember_many(deps, alice, [f"{w} note {i}." for i, w in enumerate(_WORDS)])

    async def batch(n: int) -> None:
        await remember_many(deps, alice, [f"Batch {n} item {i}: otter garden." for i in range(8)])

    async def supersede(n: int) -> None:
        # Both ends of the list: two writers lock the same rows in opposite orders.
        targets = [shared[n % 3], shared[-1 - n % 3]]
        await call(deps, alice, "remember", text=f"Heron {n} replaces two.", supersedes=targets)

    writes = [
        *(batch(n) for n in range(4)),
        *(supersede(n) for n in range(4)),
        *(call(deps, alice, "update_memory", id=m, text=f"Rewritten {m} maple.") for m in shared),
        call(deps, alice, "forget_batch", ids=shared[3:7]),
        call(deps, alice, "forget", id=shared[4], hard_delete=True),
        remember_many(deps, bob, [f"Bob {i} otter." for i in range(10)]),
    ]
    results = await asyncio.wait_for(asyncio.gather(*writes, return_exceptions=True), timeout=120)
    failures = [r for r in results if isinstance(r, BaseException)]
    # Allowed: a tool's refusal (an edit of a memory another write deleted first);
    # never a database error (a deadlock).
    assert all(isinstance(r, MemoryServiceError) for r in failures), failures
    await _assert_exact(deps, alice, bob)
    total, counted = await _stats(deps, alice)
    assert counted["otter"] == 32 and total == await _active(deps, alice)


async def _active(deps: Any, user: int) -> int:
    got = await sql(
        deps, "SELECT count(*) FROM memories WHERE user_id = %s AND deleted_at IS NULL", (user,)
    )
    return int(got[0][0])


async def test_a_writer_of_the_release_before_counts_through_the_triggers_meanwhile(
    plain_deps, dsn, alice
):
    """A rolling upgrade: the earlier release's statements (no mark) beside this one's."""
    deps = plain_deps  # the release before sealed nothing: its rows and this one's, plain
    await remember_many(deps, alice, ["Otters hold hands.", "Herons wait."])

    async def earlier_release(n: int) -> None:
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            for i in range(5):
                async with conn.transaction():
                    cur = await conn.execute(
                        "INSERT INTO memories (user_id, text, normalized_text, embedding,"
                        " embedding_provider, embedding_model)"
                        " SELECT user_id, %s, %s, embedding, 'local', 'm' FROM memories"
                        " WHERE user_id = %s LIMIT 1 RETURNING id",
                        (f"Old {n} {i} otter.", f"old {n} {i} otter.", alice),
                    )
                    row = await cur.fetchone()
                    assert row is not None
                    await conn.execute(
                        "UPDATE memories SET text = %s WHERE id = %s",
                        (f"Old {n} {i} heron.", row[0]),
                    )

    await asyncio.gather(
        *(earlier_release(n) for n in range(2)),
        *(remember_many(deps, alice, [f"New {n} {i} otter." for i in range(5)]) for n in range(2)),
    )
    await _assert_exact(deps, alice)
    total, counted = await _stats(deps, alice)
    assert total == 22 and counted["otter"] == 11 and counted["heron"] == 11
    owed = await sql(deps, "SELECT count(*) FROM relation_outbox WHERE user_id = %s", (alice,))
    assert owed == [(22,)]
    assert await sql(deps, "SELECT count(*) FROM memory_term_deltas") == [(0,)]


async def test_the_triggers_step_aside_in_a_transaction_that_counts_by_statement(deps, alice):
    """What keeps a row from being counted twice: the mark set by lock_counts."""
    async with deps.pool.connection() as conn, conn.transaction():
        await terms.lock_counts(conn, [alice])
        await conn.execute(
            "INSERT INTO memories (user_id, text, normalized_text, embedding, embedding_provider,"
            " embedding_model) VALUES (%s, 'Lonely otter.', 'lonely otter.',"
            " array_fill(0.1, ARRAY[384])::vector, 'local', 'm')",
            (alice,),
        )
    assert await _stats(deps, alice) == (0, {})
    assert await sql(deps, "SELECT count(*) FROM relation_outbox") == [(0,)]


async def test_an_import_counts_its_rows_and_owes_only_what_came_without_edges(store, tmp_path):
    deps, url = store
    alice = make_user(url, "alice")
    ids = await remember_many(deps, alice, ["Otters in the river.", "Herons by the stone."])
    gone = await remember_many(deps, alice, ["A forgotten lantern."])
    await call(deps, alice, "forget", id=gone[0])
    await sql(
        deps,
        "INSERT INTO memory_relations (user_id, memory_id, subject, predicate, object)"
        " VALUES (%s, %s, 'otters', 'live in', 'river')",
        (alice, ids[0]),
    )
    path = tmp_path / "alice.jsonl"
    with path.open("w", encoding="utf-8") as out:
        await export_store(deps.pool, out.write, username="alice", keyring=deps.keyring)
    sealing = deps.keyring if deps.settings.seal_memories else None  # as `ownsona import`
    result = await import_store(deps.pool, deps.embedder, path, into_user="carol", keyring=sealing)
    assert result.inserted == 3
    carol = (await sql(deps, "SELECT id FROM users WHERE username = 'carol'"))[0][0]
    await _assert_exact(deps, alice, carol)
    assert (await _stats(deps, carol))[0] == 2
    rows = await _rows(deps, carol)
    owed = await _outbox(deps, carol)
    # Only the heron came without edges; the forgotten lantern owes nothing.
    heron = next(m for m, r in rows.items() if r[0].startswith("Herons"))
    assert set(owed) == {heron} and owed[heron][1] is not None  # due now: the sweep sends it


async def test_deleting_an_account_while_it_writes(store):
    """The account goes whole; no statistics of it stay, nothing deadlocks."""
    deps, url = store
    alice = make_user(url, "alice")
    await remember_many(deps, alice, ["Otters everywhere."])
    survivor = make_user(url, "dave")
    await remember_many(deps, survivor, ["Dave's otter."])

    async def delete() -> None:
        async with deps.pool.connection() as conn, conn.transaction():
            await delete_account(conn, alice)

    results = await asyncio.gather(
        *(remember_many(deps, alice, [f"Otter {i}."]) for i in range(3)),
        delete(),
        return_exceptions=True,
    )
    assert not any(isinstance(r, psycopg.errors.DeadlockDetected) for r in results), results
    assert await sql(deps, "SELECT count(*) FROM memory_terms WHERE user_id = %s", (alice,)) == [
        (0,)
    ]
    assert await sql(
        deps, "SELECT count(*) FROM memory_term_totals WHERE user_id = %s", (alice,)
    ) == [(0,)]
    await _assert_exact(deps, survivor)


async def test_a_recount_rebuilds_what_rows_written_around_the_statements_lack(store):
    """A benchmark's COPY without the triggers: ``terms.recount`` counts the user again."""
    deps, url = store
    # The COPY writes plain rows: so do the tools here, so that "river" is one term.
    deps = dataclasses.replace(deps, settings=deps.settings.with_overrides(seal_memories=False))
    alice, bob = make_user(url, "alice"), make_user(url, "bob")
    await remember_many(deps, alice, ["Otters by the river.", "Herons by the river."])
    await remember_many(deps, bob, ["Bob's river."])
    async with deps.pool.connection() as conn, conn.transaction():
        await terms.lock_counts(conn, [alice])  # the triggers step aside, as without them
        await conn.execute(
            "INSERT INTO memories (user_id, text, normalized_text, embedding, embedding_provider,"
            " embedding_model) SELECT user_id, 'Copper river.', 'copper river.', embedding,"
            " 'local', 'm' FROM memories WHERE user_id = %s LIMIT 1",
            (alice,),
        )
    assert await _stats(deps, alice) != await _recount(deps, alice)
    async with deps.pool.connection() as conn, conn.transaction():
        await terms.recount(conn, alice)
    await _assert_exact(deps, alice, bob)
    assert (await _stats(deps, alice))[1]["river"] == 3
