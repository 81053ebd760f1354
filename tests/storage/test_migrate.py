"""Migrations: applied once each, in order; newer or mismatched databases refused."""

from __future__ import annotations

import asyncio
import logging
import uuid

import psycopg
import pytest
from psycopg import sql

from storage.errors import StorageError
from storage.migrate import migrate
from storage.schema import available_migrations
from tests.conftest import make_user


@pytest.fixture
def fresh_dsn(dsn: str):
    """An empty database beside the test database, dropped afterwards."""
    name = f"mig_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield dsn.replace("/ownsona_test", f"/{name}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _versions(url: str) -> list[int]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY version")]


async def test_applies_every_migration_once(fresh_dsn):
    applied = await migrate(fresh_dsn, dimensions=384)
    assert applied == [m.version for m in available_migrations()]
    assert await migrate(fresh_dsn, dimensions=384) == []
    assert _versions(fresh_dsn) == applied


async def test_refuses_a_database_newer_than_the_code(fresh_dsn):
    await migrate(fresh_dsn, dimensions=384)
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_version (version, name) VALUES (9999, 'from the future')")
    with pytest.raises(StorageError, match="newer than this code"):
        await migrate(fresh_dsn, dimensions=384)


async def test_refuses_another_embedding_dimension(fresh_dsn):
    await migrate(fresh_dsn, dimensions=384)
    with pytest.raises(StorageError, match="384-dimension"):
        await migrate(fresh_dsn, dimensions=768)


# --- migrate while users write --------------------------------------------------------------

#: Runs of "writers hammer the database while it migrates from 0018" (the issue saw 1 in 6 fail).
UNDER_LOAD_RUNS = 4
WRITERS = 4


#: A unit vector of the test dimension, for rows written the way an earlier release did.
_VECTOR = "[" + ",".join(["1"] + ["0"] * 383) + "]"


async def _hammer(pool, user_id: int, stop: asyncio.Event, done: list[str], failed: list[str]):
    """One user's client of the release before the migrations: remember, retag, forget.

    While ``ownsona migrate`` runs, the processes still serving are the previous
    release's (docs/upgrading.md): their writes are plain statements on the schema they
    know (0018's columns), each call one transaction, as fast as the database answers.
    Today's handlers would not do here: they read columns of later migrations.
    """
    n = 0
    while not stop.is_set():
        n += 1
        try:
            async with pool.connection() as conn, conn.transaction():
                text = f"Note {n} of writer {user_id}: the plum tree needs water."
                cur = await conn.execute(
                    "INSERT INTO memories (user_id, text, normalized_text, embedding,"
                    " embedding_provider, embedding_model, tags)"
                    " VALUES (%s, %s, %s, %s::vector, 'local', 'test', %s) RETURNING id",
                    (user_id, text, text.lower(), _VECTOR, ["t"]),
                )
                row = await cur.fetchone()
                assert row is not None
                memory_id = row[0]
            async with pool.connection() as conn, conn.transaction():
                await conn.execute(
                    "UPDATE memories SET tags = %s, updated_at = now()"
                    " WHERE user_id = %s AND id = %s",
                    (["t", "u"], user_id, memory_id),
                )
            if n % 2:
                async with pool.connection() as conn, conn.transaction():
                    await conn.execute(
                        "UPDATE memories SET deleted_at = now(), updated_at = now()"
                        " WHERE user_id = %s AND id = %s",
                        (user_id, memory_id),
                    )
            done.append("ok")
        except Exception as ex:  # a failed user call, whatever it was
            failed.append(f"{type(ex).__name__}: {ex}")


async def test_migrating_while_users_write_fails_no_call_and_never_deadlocks(dsn, caplog):
    from storage.pool import make_pool

    caplog.set_level(logging.WARNING, logger="storage.migrate")
    for run in range(UNDER_LOAD_RUNS):
        name = f"mig_load_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        url = dsn.replace("/ownsona_test", f"/{name}")
        try:
            assert await migrate(url, dimensions=384, up_to=18) == list(range(1, 19))
            users = [make_user(url, f"writer{i}") for i in range(WRITERS)]
            pool = make_pool(url, min_size=WRITERS, max_size=WRITERS + 2, name="test-hammer")
            await pool.open(wait=True)
            stop, done, failed = asyncio.Event(), [], []
            tasks = [asyncio.create_task(_hammer(pool, u, stop, done, failed)) for u in users]
            try:
                while len(done) < 2 * WRITERS and not failed:
                    await asyncio.sleep(0.01)
                applied = await migrate(url, dimensions=384)
                before = len(done)
                while len(done) < before + 2 * WRITERS and not failed:
                    await asyncio.sleep(0.01)
            finally:
                stop.set()
                await asyncio.gather(*tasks)
                await pool.close()
            assert failed == [], f"run {run}: users' calls failed: {failed[:3]}"
            assert applied == [m.version for m in available_migrations() if m.version > 18]
        finally:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
    gave_way = [r for r in caplog.records if "gave way" in r.getMessage()]
    print(f"migration retries over {UNDER_LOAD_RUNS} runs: {len(gave_way)}")


async def test_an_index_migration_holds_no_write_while_it_waits_and_builds(fresh_dsn):
    """Migration 0027 builds its index concurrently: a writer is never queued behind it.

    A transaction still open on ``memories`` keeps the build waiting (it waits for the
    transactions already running, as any build must). Meanwhile other users' writes
    go through at once: in a transaction, the build's lock request would queue them
    behind it (here, past their 100 ms lock timeout).
    """
    from storage.pool import make_pool

    assert await migrate(fresh_dsn, dimensions=384, up_to=26) == list(
        m.version for m in available_migrations() if m.version <= 26
    )
    writer, other = make_user(fresh_dsn, "open"), make_user(fresh_dsn, "other")
    insert = (
        "INSERT INTO memories (user_id, text, normalized_text, embedding,"
        " embedding_provider, embedding_model, tags)"
        " VALUES (%s, %s, %s, %s::vector, 'local', 'test', '{}')"
    )
    texts = (f"note {n}" for n in range(10_000))

    def new_row(user: int) -> tuple[int, str, str, str]:
        text = next(texts)
        return (user, text, text, _VECTOR)

    pool = make_pool(fresh_dsn, min_size=1, max_size=1, name="test-index-writer")
    await pool.open(wait=True)
    # Each session's first write records the id timeline (0019), locking store_meta's
    # row to the end of its transaction: both sessions get theirs done first.
    async with pool.connection() as conn:
        await conn.execute(insert, new_row(other))
    with psycopg.connect(fresh_dsn) as holding:
        holding.execute(insert, new_row(writer))
        holding.commit()
        holding.execute(insert, new_row(writer))  # this transaction stays open
        migrating = asyncio.create_task(migrate(fresh_dsn, dimensions=384))
        try:
            waiting = 0
            for _ in range(500):
                async with pool.connection() as conn, conn.transaction():
                    await conn.execute("SET LOCAL lock_timeout = '100ms'")
                    await conn.execute(insert, new_row(other))
                    cur = await conn.execute(
                        "SELECT count(*) FROM pg_stat_activity"
                        " WHERE query LIKE '%%CREATE INDEX CONCURRENTLY%%' AND wait_event IS NOT NULL"
                        " AND pid <> pg_backend_pid()"
                    )
                    row = await cur.fetchone()
                    waiting += int(row is not None and row[0] > 0)
                if waiting >= 20:
                    break
            assert waiting >= 20, "the build never waited on the open transaction"
            assert not migrating.done()
        finally:
            await pool.close()
        holding.commit()
    # Once the open transaction ended, and never gave way; then the later migrations.
    assert await migrating == [m.version for m in available_migrations() if m.version > 26]
    with psycopg.connect(fresh_dsn) as conn:
        row = conn.execute(
            "SELECT indisvalid FROM pg_index"
            " WHERE indexrelid = to_regclass('memories_user_sealed_search')"
        ).fetchone()
    assert row == (True,)


async def test_two_processes_migrating_at_once_through_a_concurrent_build(fresh_dsn):
    """The second migrator waits for the first without holding a snapshot.

    Blocked inside ``pg_advisory_lock`` it would: the first one's concurrent index
    build waits for every older snapshot, the second waits for the first's lock, and
    PostgreSQL's deadlock check cancels one of them (two web processes starting an
    upgrade together). An open transaction keeps the build waiting until the second
    migrator is surely queued.
    """
    later = [m.version for m in available_migrations() if m.version > 26]
    await migrate(fresh_dsn, dimensions=384, up_to=26)
    with psycopg.connect(fresh_dsn) as holding:
        holding.execute("LOCK TABLE memories IN ROW EXCLUSIVE MODE")  # as a writer holds it
        first = asyncio.create_task(migrate(fresh_dsn, dimensions=384))
        with psycopg.connect(fresh_dsn, autocommit=True) as watch:
            for _ in range(500):
                building = watch.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE query LIKE '%%CREATE INDEX CONCURRENTLY%%' AND wait_event IS NOT NULL"
                    " AND pid <> pg_backend_pid()"
                ).fetchone()
                if building is not None and building[0] > 0:
                    break
                await asyncio.sleep(0.01)
            second = asyncio.create_task(migrate(fresh_dsn, dimensions=384))
            await asyncio.sleep(0.3)  # the second asks for the migration lock meanwhile
            assert not first.done() and not second.done()
        holding.commit()
    results = await asyncio.gather(first, second)
    assert results == [later, []]
