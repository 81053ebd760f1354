"""``ownsona reembed``: switching the embedding model, in place and across dimensions.

The other model is an OpenAI-compatible HTTP server (the one of
tests/unit/test_openai_embedder.py) answering with hashed bag-of-words
vectors: meaningful enough for recall, and exactly computable here, so a
recall's raw cosine ``score`` shows which model's vectors of which text the
store holds. A dimension switch alters the ``memories`` table, so each test
gets a database of its own on the session's embedded cluster.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import psycopg
import pytest

from bootstrap.providers import make_embedder
from bootstrap.sealing import build_keyring, open_keyring
from config.settings import Settings
from memory.deps import Deps
from memory.errors import MemoryServiceError
from memory.providers.embedders import LOCAL_MODEL_ID, LocalEmbedder
from scripts import cli, reembed
from storage.errors import StorageError
from storage.migrate import migrate
from storage.pool import make_pool
from tests.conftest import TEST_DIMENSIONS, sealing_settings
from tests.providers.test_openai_embedder import FakeProvider, Reply, Request, _handler
from tests.tool_calls import USE_CASES, meta_for, parse_command

BOW_MODEL = "bow-test"
OTHER_DIMENSIONS = 96

PEOPLE = [
    ("Colby", "Los Angeles", "surfing"),
    ("Maren", "Oslo", "knitting"),
    ("Tobias", "Munich", "chess"),
    ("Priya", "Pune", "badminton"),
    ("Luca", "Turin", "cycling"),
    ("Ines", "Lisbon", "pottery"),
    ("Kenji", "Osaka", "karate"),
    ("Amara", "Lagos", "painting"),
    ("Sven", "Uppsala", "skiing"),
    ("Nadia", "Casablanca", "tennis"),
    ("Owen", "Cardiff", "rugby"),
    ("Leila", "Tehran", "poetry"),
    ("Diego", "Seville", "flamenco"),
    ("Hana", "Seoul", "archery"),
    ("Piet", "Utrecht", "rowing"),
    ("Zoe", "Melbourne", "climbing"),
    ("Ravi", "Chennai", "cricket"),
    ("Anya", "Kyiv", "ballet"),
    ("Mateo", "Bogota", "football"),
    ("Freya", "Bergen", "sailing"),
    ("Omar", "Cairo", "squash"),
    ("Elif", "Izmir", "baking"),
    ("Jonas", "Vilnius", "basketball"),
    ("Mei", "Taipei", "calligraphy"),
    ("Pablo", "Valencia", "paella"),
    ("Greta", "Graz", "yodelling"),
    ("Tariq", "Dubai", "falconry"),
    ("Lena", "Leipzig", "violin"),
    ("Ivo", "Zagreb", "handball"),
    ("Saoirse", "Galway", "hurling"),
    ("Bruno", "Porto", "fado"),
    ("Yara", "Recife", "capoeira"),
    ("Hugo", "Lyon", "fencing"),
    ("Kaia", "Tartu", "orienteering"),
    ("Felix", "Basel", "origami"),
]


def fact(name: str, city: str, hobby: str) -> str:
    return f"My friend {name} lives in {city} and spends every weekend {hobby}."


FACTS = [fact(*p) for p in PEOPLE]


# --- the other model: bag-of-words vectors over HTTP ---------------------------------


def bow(text: str, dims: int) -> np.ndarray:
    vector = np.zeros(dims)
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        vector[int.from_bytes(digest[:4], "big") % dims] += 1.0 if digest[4] & 1 else -1.0
    if not vector.any():
        vector[0] = 1.0
    return vector / np.linalg.norm(vector)


class BagOfWords(FakeProvider):
    """The test server's model: each request is slowed by ``delay_s``; texts are counted."""

    def __init__(self, dims: int) -> None:
        super().__init__()
        self.dims = dims
        self.delay_s = 0.0
        #: When set, every embedding request (not the width probe) fails with this status.
        self.fail_status: int | None = None

    def next_reply(self, request: Request) -> Reply:
        super().next_reply(request)
        if self.fail_status and request.body["input"] != ["dimension probe"]:
            return Reply(status=self.fail_status, body=b'{"error": {"message": "bad input"}}')
        return Reply(delay_s=self.delay_s)

    def success_body(self, request: Request, reverse: bool) -> bytes:
        import json

        data = [
            {"object": "embedding", "index": i, "embedding": bow(text, self.dims).tolist()}
            for i, text in enumerate(request.body["input"])
        ]
        return json.dumps({"object": "list", "data": data, "model": request.body["model"]}).encode()

    def texts(self) -> list[str]:
        """Every text embedded so far, but the width probe."""
        return [t for r in list(self.requests) for t in r.body["input"] if t != "dimension probe"]


@pytest.fixture(scope="module")
def bow_server() -> Iterator[tuple[BagOfWords, str, dict[int, BagOfWords]]]:
    """One HTTP server; ``/d<N>/v1`` answers with N-dimension vectors."""
    models: dict[int, BagOfWords] = {
        OTHER_DIMENSIONS: BagOfWords(OTHER_DIMENSIONS),
        TEST_DIMENSIONS: BagOfWords(TEST_DIMENSIONS),
    }
    server = ThreadingHTTPServer(("127.0.0.1", 0), _routing_handler(models))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield models[OTHER_DIMENSIONS], f"http://{host}:{port}", models
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _routing_handler(models: dict[int, BagOfWords]) -> Any:
    handlers = {dims: _handler(model) for dims, model in models.items()}

    class Route(handlers[OTHER_DIMENSIONS]):  # type: ignore[misc,valid-type]
        def do_POST(self) -> None:  # noqa: N802
            dims = int(self.path.split("/")[1][1:])
            handlers[dims].do_POST(self)  # the same request, the width's own model

    return Route


# --- a database of its own ----------------------------------------------------------


@pytest.fixture
def own_dsn(dsn: str) -> Iterator[str]:
    """A fresh database on the session's cluster, migrated at the local model's width."""
    name = f"ownsona_reembed_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = urlsplit(dsn)._replace(path=f"/{name}").geturl()
    asyncio.run(migrate(url, dimensions=TEST_DIMENSIONS))
    try:
        yield url
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


# --- helpers ------------------------------------------------------------------------

_local: list[LocalEmbedder] = []


def local_embedder() -> LocalEmbedder:
    if not _local:
        _local.append(LocalEmbedder.bundled())
    return _local[0]


def bow_settings(url: str, base: str, dims: int) -> Settings:
    return Settings(
        database_url=url,
        embedding_provider="openai",
        embedding_base_url=f"{base}/d{dims}/v1",
        embedding_model=BOW_MODEL,
        embedding_timeout_s=10,
        # The deployment's key, as its `ownsona` processes have it (bow_env: the environment).
        **sealing_settings(),
    )


def bow_env(url: str, base: str, dims: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EMBEDDING_", "REDIS_URL"))}
    env.update(
        DATABASE_URL=url,
        EMBEDDING_PROVIDER="openai",
        EMBEDDING_BASE_URL=f"{base}/d{dims}/v1",
        EMBEDDING_MODEL=BOW_MODEL,
    )
    return env


class Store:
    """A server's view of the store: a pool and an embedder (the service functions it calls)."""

    def __init__(self, url: str, settings: Settings, embedder: Any) -> None:
        self.url, self.settings, self.embedder = url, settings, embedder

    async def __aenter__(self) -> Deps:
        self.pool = make_pool(self.url, min_size=1, max_size=4, name="test-reembed")
        await self.pool.open(wait=True)
        # Its keyring, from its settings, as a server opens it.
        self.sealing = build_keyring(self.settings, self.url)
        await open_keyring(self.sealing, self.url)
        return Deps(
            settings=self.settings,
            pool=self.pool,
            embedder=self.embedder,
            keyring=self.sealing.keyring,
        )

    async def __aexit__(self, *exc: Any) -> None:
        await self.pool.close()
        if self.sealing.keyring is not None:
            await self.sealing.keyring.close()


def sql(url: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(query, args)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


def meta(url: str) -> dict[str, str]:
    return dict(sql(url, "SELECT key, value FROM store_meta"))  # type: ignore[arg-type]


def column_width(url: str, column: str) -> int | None:
    rows = sql(
        url,
        "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'memories'::regclass"
        " AND attname = %s AND NOT attisdropped",
        column,
    )
    return int(rows[0][0]) if rows else None


def table_options(url: str) -> list[str]:
    return sql(
        url, "SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = 'memories'::regclass"
    )[0][0]


async def seed(deps: Deps, user: int, texts: list[str]) -> dict[str, int]:
    payload = await USE_CASES["remember_batch"](
        deps, user, {"items": [{"text": t, "dedup_policy": "insert"} for t in texts]}
    )
    assert all(r["ok"] for r in payload["results"]), payload
    return {t: r["memory_id"] for t, r in zip(texts, payload["results"], strict=True)}


async def expected_cosine(embedder: Any, query: str, text: str) -> float:
    vectors = await embedder.embed([query, text])
    return float(np.dot(vectors[0], vectors[1]))


async def assert_recall(deps: Deps, user: int, cases: list[tuple[str, str, int]]) -> None:
    """Each query's best match is the memory, and its score is this model's cosine of its text."""
    for query, text, memory_id in cases:
        payload = await USE_CASES["recall"](deps, user, {"query": query, "limit": 3})
        top = payload["matches"][0]
        assert top["id"] == memory_id, (query, payload["matches"])
        assert top["score"] == pytest.approx(
            await expected_cosine(deps.embedder, query, text), abs=2e-3
        )


def recall_cases(
    ids: dict[str, int], people: list[tuple[str, str, str]]
) -> list[tuple[str, str, int]]:
    return [
        (f"{name} lives in {city}", fact(name, city, hobby), ids[fact(name, city, hobby)])
        for name, city, hobby in people
    ]


def new_user(url: str) -> int:
    return int(
        sql(url, "INSERT INTO users (username, password_hash) VALUES ('alice', 'x') RETURNING id")[
            0
        ][0]
    )


_EVENT_TIMES = (
    "SELECT occurred_at, valid_from, valid_to, occurred_at_parsed FROM memories WHERE id = %s"
)


def _set_event_times(url: str, memory_id: int) -> list[tuple[Any, ...]]:
    """Give a row an event time (issue 17) that re-embedding must keep; return it as stored.

    The span still holds today (valid_to far ahead): recall hides facts that no longer
    hold, and the tests recall this row after the run.
    """
    sql(
        url,
        "UPDATE memories SET occurred_at = '2023-05-07T00:00:00Z', occurred_at_parsed = true,"
        " valid_from = '2023-01-01T00:00:00Z', valid_to = '2999-01-01T00:00:00Z' WHERE id = %s",
        memory_id,
    )
    stored = sql(url, _EVENT_TIMES, memory_id)
    assert stored[0][0] is not None and stored[0][3] is True
    return stored


def run_cli(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "scripts.cli", "reembed", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# --- tests --------------------------------------------------------------------------


def test_dimension_switch_keeps_serving_resumes_and_switches_back(
    own_dsn: str, bow_server, monkeypatch, capsys
) -> None:
    bow_model, base, _ = bow_server
    url = own_dsn
    local_settings = Settings(database_url=url, **sealing_settings())
    user = new_user(url)
    sample = PEOPLE[::7]

    async def before() -> dict[str, int]:
        async with Store(url, local_settings, local_embedder()) as deps:
            ids = await seed(deps, user, FACTS)
            await assert_recall(deps, user, recall_cases(ids, sample))
            await USE_CASES["forget"](deps, user, {"id": ids[FACTS[-1]], "reason": "moved away"})
            return ids

    ids = asyncio.run(before())
    # A learned context (a centroid in the local model's space) on two rows.
    sql(
        url,
        "UPDATE memories SET context_centroid = embedding, context_count = 3 WHERE id = ANY(%s)",
        [ids[FACTS[0]], ids[FACTS[1]]],
    )
    event_times = _set_event_times(url, ids[FACTS[2]])
    total = len(FACTS)

    # The dry run counts every row (the tombstone too) and changes nothing.
    env = bow_env(url, base, OTHER_DIMENSIONS)
    for name in [k for k in os.environ if k.startswith("EMBEDDING_") or k == "REDIS_URL"]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["reembed", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"dry run: {total} rows to re-embed" in out
    assert "new vector column" in out
    assert column_width(url, "embedding_next") is None
    assert bow_model.texts() == []

    # Killed halfway: the batches done so far stay done.
    bow_model.delay_s = 0.15
    first = run_cli(env, "--batch-size", "4", "--in-flight", "1")
    deadline = time.monotonic() + 60
    staged = 0
    while time.monotonic() < deadline and staged < 12:
        time.sleep(0.05)
        if column_width(url, "embedding_next") is not None:
            staged = sql(url, "SELECT count(*) FROM memories WHERE embedding_next IS NOT NULL")[0][
                0
            ]
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=10)
    staged_ids = {
        r[0] for r in sql(url, "SELECT id FROM memories WHERE embedding_next IS NOT NULL")
    }
    assert 12 <= len(staged_ids) < total
    assert column_width(url, "embedding_next") == OTHER_DIMENSIONS
    assert meta(url)["embedding_dimensions"] == str(TEST_DIMENSIONS)
    # The run held autovacuum off the table; killed, it could not give it back.
    assert "autovacuum_enabled=false" in table_options(url)

    # Meanwhile the server on the old model serves and writes as before.
    edited = FACTS[0]
    assert ids[edited] in staged_ids  # the lowest id went first
    edited_text = "My friend Colby moved to San Diego and now spends every weekend kayaking."
    late_text = "My neighbour Wilhelmina keeps bees in Hamburg and sells honey at the market."

    async def during() -> int:
        async with Store(url, local_settings, local_embedder()) as deps:
            await assert_recall(deps, user, recall_cases(ids, sample[1:]))
            await USE_CASES["update_memory"](deps, user, {"id": ids[edited], "text": edited_text})
            late = await seed(deps, user, [late_text])
            return late[late_text]

    late_id = asyncio.run(during())
    # The edit re-embedded the live vector, which emptied the stale staged one.
    assert sql(url, "SELECT embedding_next IS NULL FROM memories WHERE id = %s", ids[edited])[0][0]
    left = total + 1 - (len(staged_ids) - 1)

    # Resumed: only what is left is embedded, while the old server keeps answering.
    texts_before = len(bow_model.texts())
    already_staged = len(staged_ids) - 1
    bow_model.delay_s = 0.25

    def staged_count() -> int | None:
        try:
            return sql(url, "SELECT count(*) FROM memories WHERE embedding_next IS NOT NULL")[0][0]
        except psycopg.errors.UndefinedColumn:
            return None  # swapped

    async def resume() -> tuple[int, str, str]:
        served = 0
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "scripts.cli",
            "reembed",
            "--batch-size",
            "4",
            "--in-flight",
            "1",
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        communicate = asyncio.create_task(proc.communicate())
        async with Store(url, local_settings, local_embedder()) as deps:
            while not communicate.done():
                try:
                    progress = staged_count()
                    await assert_recall(deps, user, recall_cases(ids, sample[1:2]))
                    # Served after this run had staged rows of its own, before the swap.
                    served += progress is not None and progress > already_staged
                except MemoryServiceError:
                    # Only once the columns are swapped may the old model stop working.
                    assert meta(url)["embedding_dimensions"] == str(OTHER_DIMENSIONS)
                    break
                await asyncio.sleep(0.05)
        out, err = await communicate
        assert proc.returncode == 0, err.decode()
        return served, out.decode(), err.decode()

    served, out, err = asyncio.run(resume())
    assert served >= 2
    assert len(bow_model.texts()) - texts_before == left
    assert re.search(rf"re-embedded {left} rows, skipped 0, in [\d.]+ s \([\d.]+ rows/s\)", out), (
        out
    )
    assert "rows/s]" in err or "row/s]" in err  # the progress bar's rate

    # Swapped in one go: the new width, the new model on every row, no staging left.
    assert column_width(url, "embedding") == OTHER_DIMENSIONS
    assert column_width(url, "embedding_next") is None
    assert column_width(url, "context_centroid") == OTHER_DIMENSIONS
    # Exactly the model's keys (no staging key left); the id allocator's timeline is not ours.
    assert {k: v for k, v in meta(url).items() if k != "id_timeline"} == {
        "embedding_dimensions": str(OTHER_DIMENSIONS),
        "embedding_provider": "openai",
        "embedding_model": BOW_MODEL,
    }
    assert sql(url, "SELECT DISTINCT embedding_provider, embedding_model FROM memories") == [
        ("openai", BOW_MODEL)
    ]
    assert sql(url, "SELECT count(*) FROM memories") == [(total + 1,)]
    assert sql(url, _EVENT_TIMES, ids[FACTS[2]]) == event_times  # the swap keeps them
    assert sql(
        url,
        "SELECT count(*) FROM memories WHERE context_centroid IS NOT NULL OR context_count <> 0",
    ) == [(0,)]
    assert sql(
        url, "SELECT count(*) FROM pg_indexes WHERE indexname = 'memories_embedding_hnsw'"
    ) == [(1,)]
    # The run that finished gave the table back to autovacuum, its own options kept.
    assert table_options(url) == ["toast_tuple_target=4096"]

    # A server on the old model refuses to start; one on the new model serves.
    from bootstrap.web import WebProcess

    with pytest.raises(StorageError, match=rf"{OTHER_DIMENSIONS}-dimension embeddings.*reembed"):
        asyncio.run(WebProcess(local_settings).open())
    new_settings = bow_settings(url, base, OTHER_DIMENSIONS)

    async def after() -> None:
        web = WebProcess(new_settings, in_process_worker=True)
        await web.open()
        runtime = web.runtime
        try:
            deps = runtime.deps
            await assert_recall(
                deps,
                user,
                recall_cases(ids, sample[1:])
                + [
                    ("Colby San Diego kayaking", edited_text, ids[edited]),
                    ("Wilhelmina keeps bees in Hamburg", late_text, late_id),
                ],
            )
            written = await runtime.write_queue.submit(
                meta_for(user, "k-1"),
                parse_command(
                    "remember", {"text": "My cousin Ottilie breeds alpacas in Peru."}, new_settings
                ),
            )
            await assert_recall(
                deps,
                user,
                [
                    (
                        "Ottilie alpacas",
                        "My cousin Ottilie breeds alpacas in Peru.",
                        written["memory_id"],
                    )
                ],
            )
        finally:
            await web.close()

    asyncio.run(after())

    # And back to the local model, in-process this time.
    summary = asyncio.run(reembed.run(local_settings, batch_size=16, progress=None))
    assert summary.done == total + 2 and summary.skipped == 0
    assert column_width(url, "embedding") == TEST_DIMENSIONS
    assert meta(url)["embedding_model"] == LOCAL_MODEL_ID

    async def back() -> None:
        async with Store(url, local_settings, local_embedder()) as deps:
            await assert_recall(
                deps,
                user,
                recall_cases(ids, sample[1:])
                + [("Where does Wilhelmina keep bees?", late_text, late_id)],
            )

    asyncio.run(back())


def test_same_dimension_rewrites_in_place(own_dsn: str, bow_server, capsys) -> None:
    _, base, models = bow_server
    same = models[TEST_DIMENSIONS]
    url = own_dsn
    local_settings = Settings(database_url=url, **sealing_settings())
    user = new_user(url)
    people = PEOPLE[:12]

    async def before() -> dict[str, int]:
        async with Store(url, local_settings, local_embedder()) as deps:
            ids = await seed(deps, user, [fact(*p) for p in people])
            await assert_recall(deps, user, recall_cases(ids, people[:4]))
            return ids

    ids = asyncio.run(before())
    sql(
        url,
        "UPDATE memories SET context_centroid = embedding, context_count = 2 WHERE id = %s",
        ids[fact(*people[0])],
    )
    attnum = sql(
        url,
        "SELECT attnum FROM pg_attribute WHERE attrelid = 'memories'::regclass AND attname = 'embedding'",
    )
    stamps = sql(url, "SELECT id, updated_at FROM memories ORDER BY id")
    event_times = _set_event_times(url, ids[fact(*people[1])])
    new_settings = bow_settings(url, base, TEST_DIMENSIONS)

    plan = asyncio.run(reembed.run(new_settings, dry_run=True, progress=None))
    assert (plan.stale, plan.mode) == (len(people), "in_place")
    embedded = len(same.texts())
    summary = asyncio.run(reembed.run(new_settings, batch_size=5, progress=None))
    assert (summary.done, summary.skipped, summary.mode) == (len(people), 0, "in_place")
    assert len(same.texts()) - embedded == len(people)

    # Rewritten in place: the same column, no staging, timestamps untouched, contexts cleared.
    assert (
        sql(
            url,
            "SELECT attnum FROM pg_attribute WHERE attrelid = 'memories'::regclass AND attname = 'embedding'",
        )
        == attnum
    )
    assert column_width(url, "embedding_next") is None
    assert sql(url, "SELECT id, updated_at FROM memories ORDER BY id") == stamps
    assert sql(url, _EVENT_TIMES, ids[fact(*people[1])]) == event_times
    assert sql(
        url,
        "SELECT count(*) FROM memories WHERE context_centroid IS NOT NULL OR context_count <> 0",
    ) == [(0,)]
    assert meta(url)["embedding_model"] == BOW_MODEL
    # Autovacuum given back, and the rewritten rows' old versions vacuumed by the run itself.
    assert table_options(url) == ["toast_tuple_target=4096"]
    assert summary.vacuum_seconds > 0
    deadline = time.monotonic() + 10  # the statistics reach the view within a second or so
    while sql(url, "SELECT last_vacuum FROM pg_stat_user_tables WHERE relname = 'memories'") == [
        (None,)
    ]:
        assert time.monotonic() < deadline, "the run did not vacuum memories"
        time.sleep(0.1)

    async def after() -> None:
        embedder = make_embedder(new_settings)
        try:
            async with Store(url, new_settings, embedder) as deps:
                await assert_recall(deps, user, recall_cases(ids, people[:6]))
        finally:
            await embedder.aclose()

    asyncio.run(after())

    # Nothing left: a second run embeds nothing.
    embedded = len(same.texts())
    again = asyncio.run(reembed.run(new_settings, progress=None))
    assert (again.done, again.stale) == (0, 0)
    assert len(same.texts()) == embedded


def test_a_failed_run_gives_the_table_back_to_autovacuum(own_dsn: str, bow_server) -> None:
    _, base, models = bow_server
    url = own_dsn
    user = new_user(url)

    async def seed_store() -> None:
        async with Store(url, Settings(database_url=url), local_embedder()) as deps:
            await seed(deps, user, [fact(*p) for p in PEOPLE[:6]])

    asyncio.run(seed_store())
    models[TEST_DIMENSIONS].fail_status = 400  # the provider refuses every batch
    try:
        with pytest.raises(reembed.ReembedError, match="HTTP 400"):
            asyncio.run(
                reembed.run(bow_settings(url, base, TEST_DIMENSIONS), batch_size=3, progress=None)
            )
    finally:
        models[TEST_DIMENSIONS].fail_status = None
    assert table_options(url) == ["toast_tuple_target=4096"]
    assert sql(url, "SELECT DISTINCT embedding_model FROM memories") == [(LOCAL_MODEL_ID,)]


def test_with_redis_the_batches_run_on_the_new_models_workers(
    own_dsn: str, bow_server, redis_url: str
) -> None:
    """A dimension switch on Redis: `ownsona reembed --worker` (new settings) takes the batches."""
    from tests.conftest import QUEUE_NAMESPACE

    bow_model, base, _ = bow_server
    url = own_dsn
    user = new_user(url)
    people = PEOPLE[:10]

    async def before() -> dict[str, int]:
        async with Store(url, Settings(database_url=url), local_embedder()) as deps:
            return await seed(deps, user, [fact(*p) for p in people])

    ids = asyncio.run(before())
    env = {
        **bow_env(url, base, OTHER_DIMENSIONS),
        "REDIS_URL": redis_url,
        "QUEUE_NAMESPACE": QUEUE_NAMESPACE,
    }
    worker = run_cli(env, "--worker", "--threads", "2")
    try:
        assert worker.stdout is not None
        line = worker.stdout.readline()
        assert "re-embedding worker running" in line, line + (
            worker.stderr.read() if worker.poll() is not None else ""
        )
        embedded = len(bow_model.texts())
        settings = bow_settings(url, base, OTHER_DIMENSIONS).with_overrides(
            redis_url=redis_url, queue_namespace=QUEUE_NAMESPACE
        )
        summary = asyncio.run(reembed.run(settings, batch_size=3, progress=None))
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=30)
    assert worker.returncode == 0
    assert (summary.done, summary.skipped) == (len(people), 0)
    # The worker embedded them (the command itself only probed the width).
    assert len(bow_model.texts()) - embedded == len(people)
    assert column_width(url, "embedding") == OTHER_DIMENSIONS

    async def after() -> None:
        embedder = make_embedder(settings)
        try:
            async with Store(url, settings, embedder) as deps:
                await assert_recall(deps, user, recall_cases(ids, people[:5]))
        finally:
            await embedder.aclose()

    asyncio.run(after())


def test_the_swap_writes_no_row_however_many_have_learned_contexts(
    own_dsn: str, bow_server
) -> None:
    """The swap holds off the server, so it changes the catalog only: every row keeps the
    version the fill wrote (no UPDATE of each learned context under the lock), and yet
    every context is reset and the new vectors are live, with a valid HNSW index even
    when an earlier run was stopped while building it."""
    from memory import reembedding
    from storage import reembed as store_reembed

    _, base, _ = bow_server
    url = own_dsn
    user = new_user(url)
    people = PEOPLE[:16]
    new_settings = bow_settings(url, base, OTHER_DIMENSIONS)

    async def seed_store() -> dict[str, int]:
        async with Store(url, Settings(database_url=url), local_embedder()) as deps:
            return await seed(deps, user, [fact(*p) for p in people])

    ids = asyncio.run(seed_store())
    learned = sorted(ids.values())[::2]
    sql(
        url,
        "UPDATE memories SET context_centroid = embedding, context_count = 3 WHERE id = ANY(%s)",
        learned,
    )

    async def fill_then_swap() -> dict[int, str]:
        embedder = make_embedder(new_settings)
        try:
            async with Store(url, new_settings, embedder) as deps:
                plan = await reembedding.prepare(deps)
                assert plan.staged
                async for batch in reembedding.stale_id_batches(deps, plan, 5):
                    result = await reembedding.reembed_batch(deps, batch, plan.target.as_message())
                    assert result["ok"] and result["done"] == len(batch), result
                # An earlier run was stopped while building the index: an invalid one is left.
                async with deps.pool.connection() as conn:
                    assert await store_reembed.build_staging_index(conn)
                sql(
                    url,
                    "UPDATE pg_index SET indisvalid = false"
                    " WHERE indexrelid = 'memories_embedding_next_hnsw'::regclass",
                )
                filled = dict(sql(url, "SELECT id, ctid::text FROM memories"))
                # Never live without a valid index; the next run's build mends it.
                with pytest.raises(StorageError, match="no valid HNSW index"):
                    await reembedding.finish(deps, plan)
                assert await reembedding.build_index(deps, plan)
                assert await reembedding.finish(deps, plan) == 0
                return filled  # type: ignore[return-value]
        finally:
            await embedder.aclose()

    filled = asyncio.run(fill_then_swap())
    assert dict(sql(url, "SELECT id, ctid::text FROM memories")) == filled
    assert sql(
        url,
        "SELECT count(*) FROM memories WHERE context_centroid IS NOT NULL OR context_count <> 0",
    ) == [(0,)]
    assert column_width(url, "embedding") == OTHER_DIMENSIONS
    assert column_width(url, "context_centroid") == OTHER_DIMENSIONS
    assert meta(url)["embedding_dimensions"] == str(OTHER_DIMENSIONS)
    assert sql(
        url,
        "SELECT i.indisvalid, a.attname FROM pg_index i"
        " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]"
        " WHERE i.indexrelid = 'memories_embedding_hnsw'::regclass",
    ) == [(True, "embedding")]

    async def recall_on_the_new_model() -> None:
        embedder = make_embedder(new_settings)
        try:
            async with Store(url, new_settings, embedder) as deps:
                await assert_recall(deps, user, recall_cases(ids, people[:4]))
                # Feedback builds a context again on the recreated columns.
                memory_id = ids[fact(*people[0])]
                payload = await USE_CASES["reinforce"](
                    deps, user, {"memory_ids": [memory_id], "query": "who lives by the ocean"}
                )
                assert payload["reinforced"][0]["context_count"] == 1, payload
        finally:
            await embedder.aclose()

    asyncio.run(recall_on_the_new_model())
    assert sql(
        url,
        "SELECT context_count, vector_dims(context_centroid) FROM memories WHERE id = %s",
        ids[fact(*people[0])],
    ) == [(1, OTHER_DIMENSIONS)]


def test_sealed_rows_are_reembedded_from_their_opened_text(own_dsn: str, bow_server) -> None:
    """A sealed store (docs/at-rest.md): the run opens each row with its user's keys and
    embeds its text, never the stored ''; the new model's cosines prove which text it was."""
    import dataclasses

    from psycopg.conninfo import conninfo_to_dict

    from storage import key_store
    from storage.sealing.master_key import new_key_text

    _, base, models = bow_server
    same = models[TEST_DIMENSIONS]
    url = own_dsn
    key = new_key_text()
    local_settings = Settings(database_url=url, master_key=key, seal_memories=True)
    user = new_user(url)
    people = PEOPLE[:6]

    async def with_keys(settings: Settings, embedder: Any, work: Any) -> Any:
        sealing = build_keyring(settings, url)
        await open_keyring(sealing, url)
        try:
            async with Store(url, settings, embedder) as deps:
                return await work(dataclasses.replace(deps, keyring=sealing.keyring))
        finally:
            assert sealing.keyring is not None
            await sealing.keyring.close()

    async def before(deps: Deps) -> dict[str, int]:
        return await seed(deps, user, [fact(*p) for p in people])

    try:
        ids = asyncio.run(with_keys(local_settings, local_embedder(), before))
        assert sql(
            url, "SELECT count(*) FROM memories WHERE text = '' AND text_sealed IS NOT NULL"
        ) == [(len(people),)]
        new_settings = dataclasses.replace(
            bow_settings(url, base, TEST_DIMENSIONS), master_key=key, seal_memories=True
        )
        embedded = len(same.texts())
        summary = asyncio.run(reembed.run(new_settings, batch_size=4, progress=None))
        assert (summary.done, summary.skipped) == (len(people), 0)
        texts = same.texts()[embedded:]
        assert sorted(texts) == sorted(fact(*p) for p in people) and "" not in texts

        async def after(deps: Deps) -> None:
            await assert_recall(deps, user, recall_cases(ids, people))

        embedder = make_embedder(new_settings)
        try:
            asyncio.run(with_keys(new_settings, embedder, after))
        finally:
            asyncio.run(embedder.aclose())
    finally:
        keys_db = conninfo_to_dict(key_store.beside(url))["dbname"]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {keys_db} WITH (FORCE)")
