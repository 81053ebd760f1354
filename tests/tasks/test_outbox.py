"""The relation-extraction outbox: owed in the write's transaction, relayed, swept, rebuilt.

Service tests run the use cases against the session's PostgreSQL; the relay
goes through a real Dramatiq broker (in-process, or Redis behind a TCP proxy
the test can cut) or, where only what is sent matters, a hook that records
its calls. The fault test starts real servers and SIGKILLs one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import dramatiq
import httpx
import psycopg
import pytest
import redis

from bootstrap.providers import make_extractor
from memory.backup import export_store, import_store
from memory.deps import Deps
from memory.graph import Relation
from memory.providers.extractors import RulesExtractor
from memory.relations import extract_relations, rebuild_relations, relay_due, sweep_forever
from storage import outbox
from storage.pool import make_pool
from storage.reembed import stale_rows, write_vectors
from tasks.actors import WorkerResources, declare_actors, extraction_hook
from tasks.broker import make_broker
from tests.conftest import QUEUE_NAMESPACE, make_user, worker_keyring
from tests.e2e.server import run_processes
from tests.opened_rows import memory_texts
from tests.ops.lifecycle_helpers import base_env, call_tool
from tests.tasks.test_extraction import ChatServer, eventually
from tests.tool_calls import USE_CASES


def owed(dsn: str) -> dict[int, tuple[Any, int]]:
    """memory_id -> (due_at, attempts) of every outbox entry."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT memory_id, due_at, attempts FROM relation_outbox").fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}


def edges_by_memory(dsn: str) -> dict[int, int]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT memory_id, count(*) FROM memory_relations GROUP BY memory_id"
        ).fetchall()
    return {r[0]: r[1] for r in rows}


class Recorder:
    """An ``on_text_stored`` hook that records what it is asked to send."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, list[int]]] = []

    def __call__(self, user_id: int, memory_ids: list[int]) -> None:
        self.calls.append((user_id, list(memory_ids)))

    def sent(self) -> list[int]:
        return sorted(m for _, ids in self.calls for m in ids)


async def remember_all(deps: Deps, user: int, texts: list[str]) -> list[int]:
    out = await USE_CASES["remember_batch"](
        deps, user, {"items": [{"text": t, "dedup_policy": "insert"} for t in texts]}
    )
    assert out["summary"]["failed"] == 0, out
    return [r["memory_id"] for r in out["results"]]


def towns(n: int, who: str = "Rowan") -> list[str]:
    return [f"{who} lives in Town {i}." for i in range(n)]


def insert_many(dsn: str, user_id: int, n: int) -> list[int]:
    """``n`` memories written straight into the table (each owed an extraction), faster than the use case."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "INSERT INTO memories (user_id, text, normalized_text, embedding, embedding_provider,"
            " embedding_model) SELECT %s, 'Rowan lives in Town ' || i || '.', 'rowan lives in town ' || i || '.',"
            " array_fill(0.1, ARRAY[384])::vector, 'local', 'm' FROM generate_series(1, %s) i RETURNING id",
            (user_id, n),
        ).fetchall()
    return sorted(r[0] for r in rows)


class Counting:
    """The rules extractor, counting its calls (each would be an LLM request)."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    async def extract(self, text: str) -> list[Relation]:
        self.calls += 1
        return await RulesExtractor().extract(text)


# --- owed in the write's own transaction -----------------------------------------------


async def test_every_stored_text_is_owed_an_extraction(deps, alice, clean_db):
    ids = await remember_all(deps, alice, towns(3))
    assert sorted(owed(clean_db)) == sorted(ids)
    for memory_id in ids:
        assert await extract_relations(deps, alice, memory_id) == 1
    assert owed(clean_db) == {}, "the extraction's transaction settles the entry"
    await USE_CASES["confirm"](deps, alice, {"id": ids[0]})
    await USE_CASES["update_memory"](deps, alice, {"id": ids[1], "tags": ["home"]})
    assert owed(clean_db) == {}, "no new text, nothing owed"
    await USE_CASES["update_memory"](deps, alice, {"id": ids[1], "text": "Rowan lives in Oslo."})
    await USE_CASES["update_memory_batch"](
        deps, alice, {"items": [{"id": ids[2], "text": "Rowan lives in Rome."}]}
    )
    assert sorted(owed(clean_db)) == sorted(ids[1:])


async def test_same_text_updates_and_re_embedding_owe_and_send_nothing(deps, alice, clean_db):
    recorder = Recorder()
    hooked = dataclasses.replace(deps, on_text_stored=recorder)
    first, second = await remember_all(hooked, alice, towns(2))
    for memory_id in (first, second):
        assert await extract_relations(deps, alice, memory_id) == 1
    recorder.calls.clear()
    await USE_CASES["update_memory"](hooked, alice, {"id": first, "text": "Rowan lives in Town 0."})
    await USE_CASES["update_memory_batch"](
        hooked, alice, {"items": [{"id": second, "text": "Rowan lives in Town 1."}]}
    )
    [vector] = await deps.embedder.embed(["Rowan lives in Town 0."])
    async with deps.pool.connection() as conn:
        # The row as a re-embedding reads it (sealed or not), as `ownsona reembed` does.
        stale = await stale_rows(conn, [first], provider="other", model="other-model", staged=False)
        assert [row.id for row in stale] == [first]
        assert (
            await write_vectors(
                conn,
                stale,
                [vector],
                provider="other",
                model="other-model",
                staged=False,
            )
            == 1
        )
    assert owed(clean_db) == {}
    assert recorder.calls == [], "no job for a text that did not change"
    # A replayed update (same idempotency key) whose extraction is done sends nothing either.
    update = {"id": first, "text": "Rowan lives in Oslo."}
    await USE_CASES["update_memory"](hooked, alice, update, idempotency_key="move-1")
    assert recorder.calls == [(alice, [first])]
    assert await extract_relations(deps, alice, first) == 1
    await USE_CASES["update_memory"](hooked, alice, update, idempotency_key="move-1")
    assert recorder.calls == [(alice, [first])]


async def test_a_job_owed_nothing_extracts_nothing(deps, alice, clean_db):
    """A retried chunk, a resend after the grace, a duplicate: no second (LLM) extraction."""
    [memory_id] = await remember_all(deps, alice, towns(1))
    counting = Counting()
    assert await extract_relations(deps, alice, memory_id, extractor=counting) == 1
    assert await extract_relations(deps, alice, memory_id, extractor=counting) is None
    assert counting.calls == 1
    assert edges_by_memory(clean_db) == {memory_id: 1}
    summary = await rebuild_relations(dataclasses.replace(deps, extractor=counting), alice)
    assert (summary.extracted, summary.edges, counting.calls) == (1, 1, 2), (
        "a rebuild owes first, then extracts"
    )


async def test_imported_memories_without_edges_are_sent_at_the_next_sweep(
    deps, alice, clean_db, tmp_path
):
    with_edges, without = await remember_all(deps, alice, towns(2))
    assert await extract_relations(deps, alice, with_edges) == 1
    path = tmp_path / "alice.jsonl"
    with path.open("w", encoding="utf-8") as out:
        await export_store(deps.pool, out.write, username="alice", keyring=deps.keyring)
    sealing = deps.keyring if deps.settings.seal_memories else None  # as `ownsona import`
    result = await import_store(deps.pool, deps.embedder, path, into_user="carol", keyring=sealing)
    assert result.inserted == 2
    [copy] = [
        row_id
        for row_id, text in memory_texts(clean_db, "u.username = 'carol'")
        if text == "Rowan lives in Town 1."
    ]
    with psycopg.connect(clean_db) as conn:
        (carol,) = conn.execute("SELECT id FROM users WHERE username = 'carol'").fetchone()
    entries = owed(clean_db)
    assert sorted(entries) == sorted([without, copy]), (
        "the copy that came with its edges owes nothing"
    )
    assert entries[copy][0] is not None, "due now: an import has no relay of its own"
    recorder = Recorder()
    assert await relay_due(dataclasses.replace(deps, on_text_stored=recorder)) == 1
    assert recorder.calls == [(carol, [copy])]


async def test_a_rolled_back_write_owes_nothing(deps, alice, clean_db):
    [kept] = await remember_all(deps, alice, towns(1))
    async with deps.pool.connection() as conn:
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                await conn.execute(
                    "INSERT INTO memories (user_id, text, normalized_text, embedding, embedding_provider,"
                    " embedding_model) SELECT user_id, 'Ana lives in Porto.', 'ana lives in porto.',"
                    " embedding, embedding_provider, embedding_model FROM memories WHERE id = %s",
                    (kept,),
                )
                await conn.execute(
                    "UPDATE memories SET text = 'Rowan lives in Lima.' WHERE id = %s", (kept,)
                )
                assert (
                    len(await (await conn.execute("SELECT 1 FROM relation_outbox")).fetchall()) == 2
                )
                raise RuntimeError("the write fails before its commit")
    assert list(owed(clean_db)) == [kept]


async def test_edges_stored_with_their_text_owe_nothing(deps, alice, clean_db):
    """An import restores a memory and its edges in one transaction: no re-extraction."""
    [source] = await remember_all(deps, alice, towns(1))
    async with deps.pool.connection() as conn, conn.transaction():
        cur = await conn.execute(
            "INSERT INTO memories (user_id, text, normalized_text, embedding, embedding_provider,"
            " embedding_model) SELECT user_id, 'Ana lives in Porto.', 'ana lives in porto.',"
            " embedding, embedding_provider, embedding_model FROM memories WHERE id = %s RETURNING id",
            (source,),
        )
        restored = (await cur.fetchone())[0]
        await conn.execute(
            "INSERT INTO memory_relations (user_id, memory_id, subject, predicate, object)"
            " VALUES (%s, %s, 'Ana', 'lives in', 'Porto')",
            (alice, restored),
        )
    assert list(owed(clean_db)) == [source], "the restored memory came with its edges"


async def test_forgotten_and_deleted_memories_never_trouble_the_relay(deps, alice, bob, clean_db):
    a = await remember_all(deps, alice, towns(3))
    await remember_all(deps, bob, towns(2, "Ana"))
    await USE_CASES["forget"](deps, alice, {"id": a[0], "hard_delete": True})
    await USE_CASES["forget"](deps, alice, {"id": a[1]})
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("DELETE FROM users WHERE id = %s", (bob,))
    assert sorted(owed(clean_db)) == [a[1], a[2]]  # the hard-deleted and bob's went with them
    recorder = Recorder()
    assert await relay_due(dataclasses.replace(deps, on_text_stored=recorder), everything=True) == 2
    assert await extract_relations(deps, alice, a[1]) is None  # forgotten: nothing owed any more
    assert await extract_relations(deps, alice, a[2]) == 1
    assert owed(clean_db) == {}


# --- the relay and the sweep -------------------------------------------------------------------


async def test_the_relay_sends_after_commit_and_a_failed_send_makes_the_entries_due(
    deps, alice, clean_db
):
    recorder = Recorder()
    ids = await remember_all(dataclasses.replace(deps, on_text_stored=recorder), alice, towns(2))
    assert recorder.calls == [(alice, ids)]
    assert {due for due, _ in owed(clean_db).values()} == {None}, "relayed: not due for the sweep"

    def unreachable(user_id: int, memory_ids: list[int]) -> None:
        raise ConnectionError("broker down")

    more = await remember_all(
        dataclasses.replace(deps, on_text_stored=unreachable), alice, towns(2, "Ana")
    )
    entries = owed(clean_db)
    assert all(entries[m][0] is not None for m in more), "the sweep sends these next"
    assert await relay_due(dataclasses.replace(deps, on_text_stored=recorder)) == 2
    assert recorder.calls[-1] == (alice, more)


async def test_the_sweep_sends_only_stale_or_due_entries_and_backs_off(deps, alice, clean_db):
    fresh, stale, failed, later = await remember_all(deps, alice, towns(4))
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute(
            "UPDATE relation_outbox SET queued_at = now() - interval '2 hours' WHERE memory_id = %s",
            (stale,),
        )
        conn.execute("UPDATE relation_outbox SET due_at = now() WHERE memory_id = %s", (failed,))
        conn.execute(
            "UPDATE relation_outbox SET due_at = now() + interval '1 hour' WHERE memory_id = %s",
            (later,),
        )
    recorder = Recorder()
    swept = dataclasses.replace(deps, on_text_stored=recorder)
    assert await relay_due(swept) == 2
    assert recorder.sent() == sorted([stale, failed])
    assert await relay_due(swept) == 0, "sent entries wait for their back-off"
    assert {m: a for m, (_, a) in owed(clean_db).items()} == {
        fresh: 0,
        stale: 1,
        failed: 1,
        later: 0,
    }
    assert await relay_due(swept, backoff_s=0) == 0  # the claim set due_at an hour ahead
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("UPDATE relation_outbox SET due_at = now() WHERE memory_id = %s", (stale,))
    assert await relay_due(swept) == 1
    with psycopg.connect(clean_db) as conn:
        wait = conn.execute(
            "SELECT extract(epoch FROM due_at - now()) FROM relation_outbox WHERE memory_id = %s",
            (stale,),
        ).fetchone()[0]
    assert 7000 < wait <= 7200, "the second send waits twice as long"


async def test_concurrent_sweeps_never_send_an_entry_twice(deps, alice, clean_db):
    ids = await remember_all(deps, alice, towns(120))
    ids += await remember_all(deps, alice, towns(120, "Ana"))
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("UPDATE relation_outbox SET due_at = now()")  # every relay failed
    first, second = Recorder(), Recorder()
    counts = await asyncio.gather(
        relay_due(dataclasses.replace(deps, on_text_stored=first)),
        relay_due(dataclasses.replace(deps, on_text_stored=second)),
    )
    assert sum(counts) == len(ids)
    assert sorted(first.sent() + second.sent()) == sorted(ids)


async def test_a_slow_broker_holds_up_no_edit_and_a_failed_send_is_due_again(deps, alice, clean_db):
    edited, extracted, waiting = await remember_all(deps, alice, towns(3))
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("UPDATE relation_outbox SET due_at = now()")  # every relay failed
    entered, release = threading.Event(), threading.Event()

    def hanging(user_id: int, memory_ids: list[int]) -> None:
        entered.set()
        release.wait(30)
        raise ConnectionError("Redis never answered")

    sweep = asyncio.create_task(relay_due(dataclasses.replace(deps, on_text_stored=hanging)))
    work: list[asyncio.Task[Any]] = []
    try:
        assert await asyncio.to_thread(entered.wait, 10), "the sweep never sent"
        # While the send hangs, an edit of a claimed memory and an extraction finishing wait for nothing.
        work = [
            asyncio.create_task(
                USE_CASES["update_memory"](
                    deps, alice, {"id": edited, "text": "Rowan lives in Oslo."}
                )
            ),
            asyncio.create_task(extract_relations(deps, alice, extracted)),
        ]
        # Waited for, not cancelled: a blocked query's cancellation would wait for the send too.
        _, pending = await asyncio.wait(work, timeout=5)
        assert not pending, "held up by the sweep's send"
    finally:
        release.set()
        await asyncio.gather(*work, return_exceptions=True)
    assert work[1].result() == 1
    with pytest.raises(ConnectionError):
        await sweep
    entries = owed(clean_db)
    assert sorted(entries) == [edited, waiting]
    assert entries[edited] == (None, 0), "its edit relays it: the failed send leaves it alone"
    assert entries[waiting][1] == 0, "a send that failed is not counted"
    recorder = Recorder()
    assert await relay_due(dataclasses.replace(deps, on_text_stored=recorder)) == 1, (
        "due again at once"
    )
    assert recorder.calls == [(alice, [waiting])]


async def test_concurrent_sweeps_over_many_claims_never_send_an_entry_twice(deps, alice, clean_db):
    ids = insert_many(clean_db, alice, 1300)  # more than two claims of 500 each
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("UPDATE relation_outbox SET due_at = now()")
    first, second = Recorder(), Recorder()
    counts = await asyncio.gather(
        relay_due(dataclasses.replace(deps, on_text_stored=first)),
        relay_due(dataclasses.replace(deps, on_text_stored=second)),
    )
    assert sum(counts) == len(ids)
    assert sorted(first.sent() + second.sent()) == ids
    assert await relay_due(dataclasses.replace(deps, on_text_stored=first)) == 0


async def test_the_start_up_sweep_sends_everything_even_past_its_limit(deps, alice, clean_db):
    ids = await remember_all(
        deps, alice, towns(5)
    )  # freshly relayed: only a send-everything sweep sends them
    recorder = Recorder()
    sweep = asyncio.create_task(
        sweep_forever(
            dataclasses.replace(deps, on_text_stored=recorder),
            everything_first=True,
            interval_s=3600,
            claim=2,
            most=2,
        )
    )
    try:
        await eventually(lambda: len(recorder.sent()) >= len(ids), timeout_s=20)
    finally:
        sweep.cancel()
        await asyncio.gather(sweep, return_exceptions=True)
    assert recorder.sent() == sorted(ids), "each sent once, the later sweeps going on from the last"


class Proxy:
    """A TCP proxy to Redis that the test can cut (every connection dropped) and restore."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.up = True
        self._pairs: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self.up:
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._pairs += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.up = False
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for s in pairs:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def restore(self) -> None:
        self.up = True

    def close(self) -> None:
        self.cut()
        self._listener.close()


@pytest.fixture
def redis_proxy(redis_url: str) -> Iterator[tuple[str, Proxy]]:
    from urllib.parse import urlsplit

    parts = urlsplit(redis_url)
    proxy = Proxy((parts.hostname or "127.0.0.1", parts.port or 6379))
    yield f"redis://127.0.0.1:{proxy.port}{parts.path}", proxy
    proxy.close()


async def test_redis_down_after_the_commit_then_the_sweep_sends_once_it_is_back(
    deps, alice, clean_db, settings, embedder, redis_url, redis_proxy
):
    proxied_url, proxy = redis_proxy

    # A separate worker, as `ownsona worker` runs, reaches Redis directly.
    async def build() -> Deps:
        pool = make_pool(clean_db, min_size=1, max_size=2, name="test-outbox-worker")
        await pool.open(wait=True)
        return Deps(
            settings=settings,
            pool=pool,
            embedder=embedder,
            extractor=make_extractor(settings),
            keyring=await worker_keyring(clean_db),
        )

    async def close(d: Deps) -> None:
        await d.pool.close()
        if d.keyring is not None:
            await d.keyring.close()

    worker_bundle = make_broker(
        redis_url, namespace=QUEUE_NAMESPACE, extra_middleware=[WorkerResources(build, close)]
    )
    declare_actors(worker_bundle.broker)
    worker = dramatiq.Worker(worker_bundle.broker, worker_threads=1, worker_timeout=100)
    worker.start()
    # The web side's broker goes through the proxy.
    web_bundle = make_broker(proxied_url, namespace=QUEUE_NAMESPACE)
    web = dataclasses.replace(
        deps, on_text_stored=extraction_hook(declare_actors(web_bundle.broker))
    )
    sweep = None
    try:
        proxy.cut()
        ids = await remember_all(web, alice, towns(30))  # acknowledged: the data is committed
        assert sorted(owed(clean_db)) == sorted(ids)
        with pytest.raises(redis.RedisError):
            await relay_due(web)  # the send fails: the claim rolls back
        assert all(due is not None for due, _ in owed(clean_db).values())
        proxy.restore()
        sweep = asyncio.create_task(sweep_forever(web, everything_first=False, interval_s=0.05))
        await eventually(lambda: owed(clean_db) == {}, timeout_s=30)
        assert edges_by_memory(clean_db) == {m: 1 for m in ids}
    finally:
        if sweep is not None:
            sweep.cancel()
            await asyncio.gather(sweep, return_exceptions=True)
        worker.stop()
        worker_bundle.broker.close()
        web_bundle.broker.close()


# --- ownsona relations rebuild ---------------------------------------------------------------


def test_rebuild_re_extracts_one_account_only(clean_db, tmp_path):
    alice, bob = make_user(clean_db, "alice"), make_user(clean_db, "bob")
    with psycopg.connect(clean_db, autocommit=True) as conn:
        ids = {}
        for user, who in ((alice, "Rowan"), (bob, "Ana")):
            ids[user] = [
                conn.execute(
                    "INSERT INTO memories (user_id, text, normalized_text, embedding, embedding_provider,"
                    " embedding_model) VALUES (%s, %s, lower(%s), array_fill(0.1, ARRAY[384])::vector,"
                    " 'local', 'm') RETURNING id",
                    (user, text, text),
                ).fetchone()[0]
                for text in towns(3, who)
            ]
        conn.execute("DELETE FROM relation_outbox")  # as if extracted long ago, and lost since
        conn.execute(
            "INSERT INTO memory_relations (user_id, memory_id, subject, predicate, object)"
            " VALUES (%s, %s, 'stale', 'stale', 'stale')",
            (alice, ids[alice][0]),
        )
    env = {**base_env(), "DATABASE_URL": clean_db, "OWNSONA_DATA_DIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "scripts.cli", "relations", "rebuild", "--user", "alice"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "3 memories extracted, 3 edges" in out.stdout and "0 failed" in out.stdout
    assert edges_by_memory(clean_db) == {m: 1 for m in ids[alice]}, "bob's memories untouched"
    assert owed(clean_db) == {}
    unknown = subprocess.run(
        [sys.executable, "-m", "scripts.cli", "relations", "rebuild", "--user", "carol"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert unknown.returncode != 0 and "No account named 'carol'" in unknown.stderr


def test_rebuild_refuses_with_the_extractor_off(clean_db, tmp_path):
    alice = make_user(clean_db, "alice")
    [memory_id] = insert_many(clean_db, alice, 1)
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO memory_relations (user_id, memory_id, subject, predicate, object)"
            " VALUES (%s, %s, 'Rowan', 'lives in', 'Town 1')",
            (alice, memory_id),
        )
    env = {
        **base_env(),
        "DATABASE_URL": clean_db,
        "OWNSONA_DATA_DIR": str(tmp_path),
        "RELATION_EXTRACTOR": "off",
    }
    out = subprocess.run(
        [sys.executable, "-m", "scripts.cli", "relations", "rebuild"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out
    assert "RELATION_EXTRACTOR is off" in out.stderr
    assert edges_by_memory(clean_db) == {memory_id: 1}, "no edge deleted"


async def test_a_long_rebuild_renews_its_hold_so_no_sweep_duplicates_it(deps, alice, clean_db):
    ids = await remember_all(deps, alice, towns(3))
    recorder = Recorder()
    swept = dataclasses.replace(deps, on_text_stored=recorder)

    class Slow(Counting):
        """Extracting the first memory takes longer than the hold (the hold is made to run out)."""

        def __init__(self) -> None:
            super().__init__()
            self.resent_while_extracting: list[int] = []

        async def extract(self, text: str) -> list[Relation]:
            async with deps.pool.connection() as conn:
                if self.calls == 0:
                    await conn.execute(
                        "UPDATE relation_outbox SET due_at = now() - interval '1 second'"
                    )
                else:  # a server's sweep meanwhile must leave alone the page being extracted
                    rows = await asyncio.to_thread(memory_texts, clean_db)
                    [current] = [row_id for row_id, stored in rows if stored == text]
                    before = len(recorder.calls)
                    await relay_due(swept)
                    if any(current in sent_ids for _, sent_ids in recorder.calls[before:]):
                        self.resent_while_extracting.append(current)
            return await super().extract(text)

    slow = Slow()
    summary = await rebuild_relations(dataclasses.replace(deps, extractor=slow), alice, page_size=1)
    assert (summary.extracted, slow.calls) == (3, 3)
    assert slow.resent_while_extracting == []
    assert edges_by_memory(clean_db) == {m: 1 for m in ids}
    assert owed(clean_db) == {}


async def test_owing_everything_skips_a_memory_deleted_meanwhile(deps, alice, clean_db):
    kept, deleted = await remember_all(deps, alice, towns(2))
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("DELETE FROM relation_outbox")
    async with await psycopg.AsyncConnection.connect(clean_db) as deleter, deleter.transaction():
        await deleter.execute("DELETE FROM memories WHERE id = %s", (deleted,))

        async def owe() -> int:
            async with deps.pool.connection() as conn, conn.transaction():
                return await outbox.owe_all(conn, alice, hold_s=60)

        owing = asyncio.create_task(owe())

        def waiting() -> bool:
            with psycopg.connect(clean_db) as conn:
                return (
                    conn.execute(
                        "SELECT count(*) FROM pg_stat_activity"
                        " WHERE wait_event_type = 'Lock' AND query LIKE '%%INSERT INTO relation_outbox%%'"
                    ).fetchone()[0]
                    > 0
                )

        await eventually(waiting, timeout_s=10)
        # The delete commits while owe_all waits on its row.
    assert await asyncio.wait_for(owing, 10) == 1
    assert list(owed(clean_db)) == [kept]


async def test_a_failed_rebuild_leaves_its_memories_owed(deps, alice, clean_db):
    ids = await remember_all(deps, alice, towns(2))
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("DELETE FROM relation_outbox")
    chat = ChatServer()
    try:
        chat.answer((500, '{"error": "down"}', 0.0))
        from memory.providers.extractors import LLMExtractor

        broken = dataclasses.replace(
            deps,
            extractor=LLMExtractor(
                base_url=chat.url, model="m", timeout_s=2, client=httpx.AsyncClient
            ),
        )
        summary = await rebuild_relations(broken, alice)
    finally:
        chat.close()
    assert (summary.memories, summary.extracted, summary.failed) == (2, 0, 2)
    assert sorted(owed(clean_db)) == sorted(ids)
    assert all(due is not None for due, _ in owed(clean_db).values()), "held back, then the sweep's"


# --- the fault test: SIGKILL right after a 200-item remember_batch is answered ---------

BATCH = 200


async def test_extraction_owed_by_a_killed_server_is_done_after_restart(clean_db, tmp_path):
    hanging = ChatServer()
    hanging.answer((200, "{}", 600.0))  # the first server's extractions can never finish
    env = {
        **base_env(),
        "DATABASE_URL": clean_db,
        "RELATION_EXTRACTOR": "llm",
        "LLM_BASE_URL": hanging.url,
        "LLM_MODEL": "test-model",
    }
    for run in ("first", "second"):
        (tmp_path / run).mkdir()
    try:
        with run_processes(tmp_path / "first", env) as server:
            token = server.token()
            answer = call_tool(
                server.url,
                token,
                "remember_batch",
                {"items": [{"text": t, "dedup_policy": "insert"} for t in towns(BATCH)]},
            )
            server.process.send_signal(signal.SIGKILL)
            server.process.wait(10)
        assert answer["summary"] == {"total": BATCH, "succeeded": BATCH, "failed": 0}
        ids = sorted(r["memory_id"] for r in answer["results"])
        assert sorted(owed(clean_db)) == ids and edges_by_memory(clean_db) == {}, (
            "killed before extracting"
        )
    finally:
        hanging.close()
    with run_processes(tmp_path / "second", {**base_env(), "DATABASE_URL": clean_db}) as server:
        try:
            await eventually(lambda: not owed(clean_db), timeout_s=60)
        except AssertionError as ex:
            raise AssertionError(server.log()) from ex
    assert edges_by_memory(clean_db) == {m: 1 for m in ids}
