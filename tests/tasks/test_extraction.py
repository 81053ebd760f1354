"""Relation extraction in the background: the llm extractor over HTTP, and the Dramatiq job.

The LLM is a real local HTTP server speaking the chat-completions wire format
(scripted answers: good JSON, malformed JSON, a 500, a hang). The job runs on
a real Dramatiq worker, in-process and over Redis.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import dramatiq
import httpx
import psycopg
import pytest

from bootstrap.providers import make_extractor
from config.settings import SettingsError
from memory.deps import Deps
from memory.graph import Relation
from memory.providers.extractors import ExtractionError, LLMExtractor
from storage.pool import make_pool
from tasks.actors import BACKGROUND_QUEUE, WorkerResources, declare_actors, extraction_hook
from tasks.broker import make_broker
from tests.conftest import QUEUE_NAMESPACE, worker_keyring
from tests.opened_rows import memory_texts
from tests.tool_calls import USE_CASES

# --- a scripted chat-completions server ----------------------------------------------------


def completion(content: str) -> tuple[int, str, float]:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
    }
    return 200, json.dumps(body), 0.0


def relations_answer(*triples: tuple[str, str, str]) -> tuple[int, str, float]:
    return completion(
        json.dumps(
            {
                "relations": [
                    dict(zip(("subject", "predicate", "object"), t, strict=True)) for t in triples
                ]
            }
        )
    )


GOOD = relations_answer(("Dana", "manages", "the user"))
MALFORMED = completion('{"relations": [{"subject": "Dana", "predicate": "manages"')
SERVER_ERROR = (500, '{"error": {"message": "overloaded"}}', 0.0)
HANG = (200, json.dumps({"choices": []}), 3.0)  # answers only after the client gave up


class ChatServer:
    """``POST /v1/chat/completions`` answering from a script; the last answer repeats."""

    def __init__(self) -> None:
        self.script: list[tuple[int, str, float]] = [GOOD]
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(
                        {"path": self.path, "headers": dict(self.headers), "body": body}
                    )
                    status, text, delay = (
                        server.script.pop(0) if len(server.script) > 1 else server.script[0]
                    )
                if delay:
                    time.sleep(delay)
                try:
                    data = text.encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and left

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def answer(self, *script: tuple[int, str, float]) -> None:
        with self._lock:
            self.script = list(script)
            self.requests.clear()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def llm() -> Iterator[ChatServer]:
    server = ChatServer()
    yield server
    server.close()


def extractor(llm: ChatServer, **kw: Any) -> LLMExtractor:
    kw.setdefault("client", httpx.AsyncClient)  # one client per call, as the factory builds it
    return LLMExtractor(base_url=llm.url, model="test-model", api_key="sk-test-key", **kw)


# --- the llm extractor --------------------------------------------------------------------------


async def test_asks_for_json_and_returns_normalised_relations(llm):
    llm.answer(
        relations_answer(
            ("Dana", "is manager of", "me"),
            ("Dana's husband", "is", "Lee"),
            ("Lee", "Husband Of", "Dana"),
        )
    )
    got = await extractor(llm).extract("Dana is my manager. Her husband is Lee.")
    assert got == [
        Relation("Dana", "manages", "the user"),
        Relation("Dana's husband", "is", "Lee"),
        Relation("Lee", "husband of", "Dana"),
    ]
    [request] = llm.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test-key"
    body = request["body"]
    assert body["model"] == "test-model" and body["response_format"] == {"type": "json_object"}
    assert body["messages"][0]["role"] == "system" and "JSON" in body["messages"][0]["content"]
    assert "Dana is my manager. Her husband is Lee." in body["messages"][1]["content"]


async def test_fenced_json_and_a_bare_array_are_accepted(llm):
    llm.answer(
        completion(
            '```json\n{"relations": [{"subject": "I", "predicate": "live in", "object": "Oslo"}]}\n```'
        )
    )
    assert await extractor(llm).extract("I live in Oslo.") == [
        Relation("the user", "live in", "Oslo")
    ]
    llm.answer(completion('[{"subject": "Ana", "predicate": "sister of", "object": "the user"}]'))
    assert await extractor(llm).extract("Ana is my sister.") == [
        Relation("Ana", "sister of", "the user")
    ]


async def test_invalid_items_never_come_back(llm):
    llm.answer(
        completion(
            json.dumps(
                {
                    "relations": [
                        {"subject": "Ana", "predicate": "lives in", "object": "Porto"},
                        {"subject": "Ana", "predicate": "lives in"},  # missing object
                        {"subject": 7, "predicate": "likes", "object": "tea"},  # not a string
                        {"subject": "Ana", "predicate": "likes", "object": "   "},  # blank
                        {"subject": "Ana", "predicate": "likes", "object": "x" * 500},  # too long
                        {"subject": "Ana", "predicate": "likes", "object": "te\u0000a"},  # NUL
                        {
                            "subject": "me",
                            "predicate": "is",
                            "object": "I",
                        },  # a self-loop once resolved
                        "Ana likes tea",  # not an object
                        {"subject": "Ana", "predicate": "lives in", "object": "Porto"},  # duplicate
                    ]
                }
            )
        )
    )
    assert await extractor(llm).extract("Ana lives in Porto.") == [
        Relation("Ana", "lives in", "Porto")
    ]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (MALFORMED, "not valid JSON"),
        (completion('{"facts": []}'), "no relations array"),
        (completion('"just text"'), "no relations array"),
        ((200, "<html>busy</html>", 0.0), "not a chat completion"),
        ((200, json.dumps({"choices": [{"message": {"content": None}}]}), 0.0), "no text content"),
        (SERVER_ERROR, "HTTP 500"),
        ((401, '{"error": "bad key"}', 0.0), "HTTP 401"),
    ],
)
async def test_failures_raise_extraction_error(llm, answer, message):
    llm.answer(answer)
    with pytest.raises(ExtractionError) as info:
        await extractor(llm).extract("My secret diary entry: Dana is my manager.")
    assert message in str(info.value)
    assert "Dana" not in str(info.value) and "sk-test-key" not in str(info.value)


async def test_a_timeout_raises_extraction_error(llm):
    llm.answer(HANG)
    started = time.perf_counter()
    with pytest.raises(ExtractionError, match="timed out"):
        await extractor(llm, timeout_s=0.3).extract("Dana is my manager.")
    assert time.perf_counter() - started < 2.5


async def test_an_unreachable_endpoint_raises_extraction_error():
    ex = LLMExtractor(
        base_url="http://127.0.0.1:9/v1", model="m", timeout_s=2, client=httpx.AsyncClient
    )
    with pytest.raises(ExtractionError, match="could not be reached"):
        await ex.extract("Dana is my manager.")


async def test_servers_without_json_mode_are_asked_in_the_prompt_only(llm):
    llm.answer(
        (400, '{"error": {"message": "response_format json_object is not supported"}}', 0.0), GOOD
    )
    ex = extractor(llm)
    assert await ex.extract("Dana is my manager.") == [Relation("Dana", "manages", "the user")]
    assert (
        "response_format" in llm.requests[0]["body"]
        and "response_format" not in llm.requests[1]["body"]
    )


def test_make_extractor_follows_the_settings(settings):
    assert make_extractor(settings).name == "rules"
    assert make_extractor(settings.with_overrides(relation_extractor="off")) is None
    llm = make_extractor(
        settings.with_overrides(relation_extractor="llm", llm_base_url="http://x/v1", llm_model="m")
    )
    assert llm is not None and llm.name == "llm" and "sk" not in repr(llm)
    with pytest.raises(SettingsError, match="^LLM_MODEL: is required with RELATION_EXTRACTOR=llm$"):
        make_extractor(
            settings.with_overrides(relation_extractor="llm", llm_base_url="http://x/v1")
        )


# --- the Dramatiq job -------------------------------------------------------------------------------

MAX_RETRIES = 3


def edge_count(dsn: str, memory_id: int | None = None) -> int:
    with psycopg.connect(dsn) as conn:
        if memory_id is None:
            return conn.execute("SELECT count(*) FROM memory_relations").fetchone()[0]
        return conn.execute(
            "SELECT count(*) FROM memory_relations WHERE memory_id = %s", (memory_id,)
        ).fetchone()[0]


def memory_row(dsn: str, memory_id: int) -> tuple[Any, ...]:
    """``(text, deleted_at, salience, updated_at)``, the text opened if sealed."""
    ((_, text),) = memory_texts(dsn, "m.id = %s", (memory_id,))
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT deleted_at, salience, updated_at FROM memories WHERE id = %s", (memory_id,)
        ).fetchone()
    assert row is not None
    return (text, *row)


async def eventually(check: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await asyncio.to_thread(check):
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


@pytest.fixture(params=["in-process", "redis"])
async def job(request, clean_db, settings, embedder, llm):
    """A running worker whose extractor is the llm one against ``llm``; yields (deps for the caller, bundle)."""
    redis_url = request.getfixturevalue("redis_url") if request.param == "redis" else None
    worker_extractor = extractor(llm, timeout_s=0.5)

    async def build() -> Deps:
        pool = make_pool(clean_db, min_size=1, max_size=2, name="test-extraction-worker")
        await pool.open(wait=True)
        return Deps(
            settings=settings,
            pool=pool,
            embedder=embedder,
            extractor=worker_extractor,
            keyring=await worker_keyring(clean_db),
        )

    async def close(d: Deps) -> None:
        await d.pool.close()
        if d.keyring is not None:
            await d.keyring.close()

    bundle = make_broker(
        redis_url, namespace=QUEUE_NAMESPACE, extra_middleware=[WorkerResources(build, close)]
    )
    actors = declare_actors(
        bundle.broker,
        extraction_min_backoff_ms=50,
        extraction_max_backoff_ms=200,
        extraction_max_retries=MAX_RETRIES,
    )
    worker = dramatiq.Worker(bundle.broker, worker_threads=2, worker_timeout=100)
    worker.start()
    yield actors, bundle
    worker.stop()
    bundle.broker.close()


async def remember(deps, actors, user: int, text: str) -> int:
    caller = dataclasses.replace(deps, on_text_stored=extraction_hook(actors))
    out = await USE_CASES["remember"](caller, user, {"text": text})
    assert out["ok"] and out["message"] == "Ok"
    return int(out["memory_id"])


async def test_a_stored_memory_gets_its_edges_in_the_background(job, deps, alice, clean_db, llm):
    actors, _ = job
    llm.answer(relations_answer(("Dana", "manages", "the user")))
    m = await remember(deps, actors, alice, "Dana is my manager.")
    await eventually(lambda: edge_count(clean_db, m) == 1)
    out = await USE_CASES["query_relations"](deps, alice, {"entity": "my manager"})
    assert [(r["subject"], r["source_memory_id"]) for r in out["relations"]] == [("Dana", m)]


async def test_failures_retry_with_back_off_until_a_good_answer(job, deps, alice, clean_db, llm):
    actors, _ = job
    llm.answer(SERVER_ERROR, MALFORMED, HANG, relations_answer(("Dana", "manages", "the user")))
    m = await remember(deps, actors, alice, "Dana is my manager.")
    assert memory_row(clean_db, m)[0] == "Dana is my manager.", (
        "stored before and regardless of extraction"
    )
    await eventually(lambda: edge_count(clean_db, m) == 1)
    assert len(llm.requests) == 4


async def test_a_job_that_never_succeeds_leaves_the_memory_alone(job, deps, alice, clean_db, llm):
    actors, _ = job
    llm.answer(MALFORMED)
    m = await remember(deps, actors, alice, "Dana is my manager.")
    before = memory_row(clean_db, m)
    await eventually(lambda: len(llm.requests) >= MAX_RETRIES + 1)
    await asyncio.sleep(0.5)  # would a further retry come?
    assert len(llm.requests) == MAX_RETRIES + 1
    assert edge_count(clean_db) == 0, "nothing invalid lands in the graph"
    assert memory_row(clean_db, m) == before


async def test_a_failed_re_extraction_keeps_the_old_edges(job, deps, alice, clean_db, llm):
    actors, _ = job
    llm.answer(relations_answer(("the user", "lives in", "Berlin")))
    m = await remember(deps, actors, alice, "I live in Berlin.")
    await eventually(lambda: edge_count(clean_db, m) == 1)
    llm.answer(SERVER_ERROR)
    caller = dataclasses.replace(deps, on_text_stored=extraction_hook(actors))
    await USE_CASES["update_memory"](caller, alice, {"id": m, "text": "I live in Munich."})
    await eventually(lambda: len(llm.requests) >= MAX_RETRIES + 1)
    assert memory_row(clean_db, m)[0] == "I live in Munich."
    assert edge_count(clean_db, m) == 1  # the job never got a valid answer: nothing replaced


async def test_the_rules_extractor_runs_as_a_job_too(clean_db, settings, embedder, deps, alice):
    async def build() -> Deps:
        pool = make_pool(clean_db, min_size=1, max_size=2, name="test-rules-worker")
        await pool.open(wait=True)
        # The composition root passes the extractor; None would mean extraction is off.
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

    bundle = make_broker(None, extra_middleware=[WorkerResources(build, close)])
    actors = declare_actors(bundle.broker)
    worker = dramatiq.Worker(bundle.broker, worker_threads=1, worker_timeout=100)
    worker.start()
    try:
        m = await remember(deps, actors, alice, "My son Colby lives in Los Angeles.")
        await asyncio.to_thread(bundle.broker.join, BACKGROUND_QUEUE, timeout=20_000)
        assert edge_count(clean_db, m) == 2
    finally:
        worker.stop()
        bundle.broker.close()
