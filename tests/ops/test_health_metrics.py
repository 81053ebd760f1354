"""/readyz and /metrics against real PostgreSQL, Redis and the local model.

The app runs the real use cases; queued tools go through the real
Dramatiq write queue on Redis, to a worker running in this process.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator
from typing import Any

import dramatiq
import falcon.testing
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from api.app import create_app
from api.runtime import Runtime
from auth.bearer import BearerValidator
from auth.keys import KeyStore
from auth.tokens import issue_access_token
from config.settings import Settings
from memory.deps import Deps
from memory.providers.embedders import OpenAIEmbedder
from memory.providers.reranker import HttpReranker
from memory.recall.rerank import RerankStage
from storage.pool import make_pool
from tasks.actors import WorkerResources, declare_actors
from tasks.broker import make_broker
from tasks.queue import DramatiqWriteQueue
from tests.api.conftest import Mcp
from tests.conftest import QUEUE_NAMESPACE, make_user
from tests.providers import rerank_server
from tests.providers.test_openai_embedder import FakeProvider, Reply, serve_provider
from tests.tasks.test_queue import _count

METRICS_TOKEN = "scrape-token-5b1e0c7d9a"
PUBLIC_URL = "https://mem.example"
#: In the URLs of the unreachable services below: must never show in an answer.
SECRET_PASSWORD = "pw-never-show-8c1f"


def closed_port() -> int:
    from tests.e2e.server import free_port

    return free_port()  # bound and released: nothing listens there


def ops_settings(**changes: Any) -> Settings:
    base = Settings(
        public_url=PUBLIC_URL,
        metrics_enabled=True,
        metrics_token=METRICS_TOKEN,
        queue_namespace=QUEUE_NAMESPACE,
    )
    return base.with_overrides(**changes)


async def keystore_for(pool: Any, settings: Settings) -> KeyStore:
    store = KeyStore(pool, access_token_ttl_s=settings.access_token_ttl_s)
    await store.load()
    return store


class NoQueue:
    """A write queue for tests that call no queued tool."""

    async def submit(self, *args: Any) -> dict[str, Any]:
        raise AssertionError("no queued write expected")


@pytest.fixture
async def served(clean_db: str, pool: Any, embedder: Any, redis_url: str) -> AsyncIterator[Any]:
    """The real tools, with writes on Redis to a worker in this process."""
    settings = ops_settings(redis_url=redis_url)

    async def build() -> Deps:
        worker_pool = make_pool(clean_db, min_size=1, max_size=4, name="test-worker")
        await worker_pool.open(wait=True)
        return Deps(settings=settings, pool=worker_pool, embedder=embedder)

    async def close(deps: Deps) -> None:
        await deps.pool.close()

    bundle = make_broker(
        redis_url, namespace=QUEUE_NAMESPACE, extra_middleware=[WorkerResources(build, close)]
    )
    actors = declare_actors(bundle.broker)
    worker = dramatiq.Worker(bundle.broker, worker_threads=2, worker_timeout=100)
    worker.start()
    queue = DramatiqWriteQueue(bundle, actors, timeout_s=30)
    keystore = await keystore_for(pool, settings)
    runtime = Runtime(
        settings,
        Deps(settings=settings, pool=pool, embedder=embedder),
        queue,
        keystore,
        BearerValidator(keystore, settings),
    )
    user_id = make_user(clean_db, "alice")
    token = issue_access_token(
        keystore, settings, user_id=user_id, client_id="t", scope="memory:read memory:write"
    )
    try:
        yield settings, runtime, token, bundle, user_id
    finally:
        await queue.aclose()
        worker.stop()
        bundle.broker.close()


@pytest.fixture
async def conductor(served: Any) -> AsyncIterator[falcon.testing.ASGIConductor]:
    settings, runtime, *_ = served
    async with falcon.testing.ASGIConductor(create_app(settings, runtime=runtime)) as c:
        yield c


def scrape_headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {METRICS_TOKEN}"}


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a Prometheus text page, keyed by name and labels."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(page: dict, name: str, **labels: str) -> float | None:
    return page.get((name, frozenset(labels.items())))


# --- /readyz -------------------------------------------------------------------------


async def test_readyz_is_200_with_every_check_when_all_answer(
    conductor: falcon.testing.ASGIConductor,
) -> None:
    result = await conductor.simulate_get("/readyz")
    assert result.status_code == 200, result.text
    body = result.json
    assert body["status"] == "ready"
    assert set(body["checks"]) == {"database", "redis", "embedder"}
    for check in body["checks"].values():
        assert check["ok"] is True and check["ms"] >= 0
    assert result.headers["cache-control"] == "no-store"


async def test_readyz_is_503_when_the_database_is_unreachable(embedder: Any) -> None:
    settings = ops_settings()
    dead = make_pool(
        f"postgresql://ownsona:{SECRET_PASSWORD}@127.0.0.1:{closed_port()}/x?connect_timeout=1",
        min_size=1,
        max_size=1,
        name="dead",
    )
    await dead.open(wait=False)
    runtime = Runtime(
        settings,
        Deps(settings=settings, pool=dead, embedder=embedder),
        NoQueue(),
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
    )
    try:
        async with falcon.testing.ASGIConductor(create_app(settings, runtime=runtime)) as c:
            result = await c.simulate_get("/readyz")
    finally:
        await dead.close()
    assert result.status_code == 503
    checks = result.json["checks"]
    assert result.json["status"] == "unavailable"
    assert checks["database"]["ok"] is False and checks["database"]["error"]
    assert checks["embedder"]["ok"] is True
    assert "redis" not in checks  # not configured, not checked
    assert SECRET_PASSWORD not in result.text and "postgresql://" not in result.text


async def test_readyz_is_503_when_redis_is_configured_but_down(
    clean_db: str, pool: Any, embedder: Any
) -> None:
    settings = ops_settings(redis_url=f"redis://:{SECRET_PASSWORD}@127.0.0.1:{closed_port()}/0")
    # The check is the write queue's own: could it queue a write now?
    bundle = make_broker(settings.redis_url, namespace=QUEUE_NAMESPACE)
    queue = DramatiqWriteQueue(bundle, declare_actors(bundle.broker), timeout_s=30)
    runtime = Runtime(
        settings,
        Deps(settings=settings, pool=pool, embedder=embedder),
        queue,
        await keystore_for(pool, settings),
        None,  # type: ignore[arg-type]
    )
    try:
        async with falcon.testing.ASGIConductor(create_app(settings, runtime=runtime)) as c:
            result = await c.simulate_get("/readyz")
    finally:
        await queue.aclose()
        bundle.broker.close()
    assert result.status_code == 503
    checks = result.json["checks"]
    assert checks["redis"] == {"ok": False, "ms": checks["redis"]["ms"], "error": "ConnectionError"}
    assert checks["database"]["ok"] is True and checks["embedder"]["ok"] is True
    assert SECRET_PASSWORD not in result.text and "redis://" not in result.text


@pytest.fixture
def failing_provider() -> Iterator[tuple[FakeProvider, str]]:
    """The OpenAI-compatible test server, answering every request with HTTP 500."""
    fake = FakeProvider()
    fake.dims = 384
    with serve_provider(fake) as base_url:
        yield fake, base_url


async def test_readyz_is_503_while_the_embedder_fails_and_200_once_it_answers(
    clean_db: str, pool: Any, failing_provider: tuple[FakeProvider, str]
) -> None:
    provider, base_url = failing_provider
    provider.script = [Reply(status=500, body=b'{"error": {"message": "overloaded"}}')]
    embedder = OpenAIEmbedder(
        base_url=base_url,
        model="m",
        dimensions=384,
        max_attempts=1,
        client=httpx.AsyncClient(),
        owns_client=True,
    )
    settings = ops_settings()
    runtime = Runtime(
        settings,
        Deps(settings=settings, pool=pool, embedder=embedder),
        NoQueue(),
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
    )
    try:
        async with falcon.testing.ASGIConductor(create_app(settings, runtime=runtime)) as c:
            down = await c.simulate_get("/readyz")
            up = await c.simulate_get("/readyz")
            again = await c.simulate_get("/readyz")
    finally:
        await embedder.aclose()
    assert down.status_code == 503
    assert down.json["checks"]["embedder"] == {
        "ok": False, "ms": down.json["checks"]["embedder"]["ms"], "error": "MemoryServiceError"
    }  # fmt: skip
    assert up.status_code == 200 and again.status_code == 200
    # A passing check is reused for a while: two probes, one provider call after the failure.
    assert len(provider.requests) == 2


# --- /metrics --------------------------------------------------------------------------


async def test_metrics_are_not_served_by_default(pool: Any, embedder: Any) -> None:
    settings = Settings(public_url=PUBLIC_URL)
    runtime = Runtime(
        settings,
        Deps(settings=settings, pool=pool, embedder=embedder),
        NoQueue(),
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
    )
    async with falcon.testing.ASGIConductor(create_app(settings, runtime=runtime)) as c:
        result = await c.simulate_get("/metrics", headers=scrape_headers())
    assert result.status_code == 404
    assert "ownsona_" not in result.text


async def test_metrics_want_the_token(conductor: falcon.testing.ASGIConductor) -> None:
    missing = await conductor.simulate_get("/metrics")
    wrong = await conductor.simulate_get(
        "/metrics", headers={"Authorization": "Bearer not-the-token-at-all"}
    )
    right = await conductor.simulate_get("/metrics", headers=scrape_headers())
    assert missing.status_code == 401 and wrong.status_code == 401
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert "ownsona_" not in missing.text + wrong.text
    assert right.status_code == 200
    assert right.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert "ownsona_db_pool_max" in right.text


async def test_tool_calls_show_as_latency_errors_write_wait_and_embedder_metrics(
    served: Any, conductor: falcon.testing.ASGIConductor, clean_db: str
) -> None:
    *_, token, _bundle, user_id = served
    mcp = Mcp(conductor, token)
    for text in ("My cat Miso is ten years old.", "I play the cello on Sundays."):
        assert (await mcp.call_tool("remember", {"text": text}))["isError"] is False
    facts = ("I grew up in Lyon.", "I am allergic to pollen.", "I drive a red van.")
    batch = [{"text": t} for t in facts]
    assert (await mcp.call_tool("remember_batch", {"items": batch}))["isError"] is False
    for query in ("my cat", "music", "where I grew up"):
        assert (await mcp.call_tool("recall", {"query": query}))["isError"] is False
    missing = await mcp.call_tool("get_memory", {"id": 999_999})
    assert missing["structuredContent"]["error"]["code"] == "NOT_FOUND"
    queued_missing = await mcp.call_tool("forget", {"id": 999_999})
    assert queued_missing["structuredContent"]["error"]["code"] == "NOT_FOUND"
    assert _count(clean_db, user_id) == 5

    result = await conductor.simulate_get("/metrics", headers=scrape_headers())
    assert result.status_code == 200
    page = samples(result.text)

    def count(name: str, **labels: str) -> float | None:
        return value(page, name, **labels)

    assert count("ownsona_tool_duration_seconds_count", tool="remember") == 2
    assert count("ownsona_tool_duration_seconds_count", tool="remember_batch") == 1
    assert count("ownsona_tool_duration_seconds_count", tool="recall") == 3
    assert count("ownsona_tool_duration_seconds_count", tool="get_memory") == 1
    assert count("ownsona_tool_errors_total", tool="get_memory", code="NOT_FOUND") == 1
    assert count("ownsona_tool_errors_total", tool="forget", code="NOT_FOUND") == 1
    assert count("ownsona_tool_errors_total", tool="recall", code="NOT_FOUND") is None
    # Only queued tools wait for a write; the waits fit inside the tool's own latency.
    assert count("ownsona_write_wait_seconds_count", tool="remember") == 2
    assert count("ownsona_write_wait_seconds_count", tool="forget") == 1
    assert count("ownsona_write_wait_seconds_count", tool="recall") is None
    wait = count("ownsona_write_wait_seconds_sum", tool="remember")
    total = count("ownsona_tool_duration_seconds_sum", tool="remember")
    assert wait is not None and total is not None and 0 < wait <= total
    # The worker here shares the embedder: the batch of three was one provider call of 3 texts.
    three = count("ownsona_embed_batch_size_bucket", provider="local", le="4.0")
    two = count("ownsona_embed_batch_size_bucket", provider="local", le="2.0")
    assert three is not None and two is not None and three - two == 1
    assert (count("ownsona_embed_duration_seconds_count", provider="local") or 0) >= 6
    # Every /mcp POST so far answered 200 (tool errors are results, not HTTP errors).
    assert count("ownsona_http_requests_total", method="POST", route="/mcp", status="200") == 8
    assert count("ownsona_db_pool_max", pool="tests") == 8
    assert count("ownsona_queue_depth", queue="ownsona-writes") == 0
    # No recall is held back once every call has answered.
    assert count("ownsona_queries_waiting") == 0


async def test_reranker_calls_and_failures_are_counted(served: Any) -> None:
    settings, runtime, token, *_ = served
    fake = rerank_server.FakeReranker(style="tei")
    fake.script.append(rerank_server.Reply(status=502, body=b"{}"))
    with rerank_server.serve_reranker(fake) as base_url:
        reranker = HttpReranker(
            style="tei", base_url=base_url, client=httpx.AsyncClient(), owns_client=True
        )
        clock = [0.0]
        stage = RerankStage(reranker, depth=5, clock=lambda: clock[0])
        reranking = dataclasses.replace(
            runtime, deps=dataclasses.replace(runtime.deps, reranker=stage)
        )
        async with falcon.testing.ASGIConductor(create_app(settings, runtime=reranking)) as c:
            mcp = Mcp(c, token)
            batch = [{"text": t} for t in ("I grew up in Lyon.", "I moved to Porto in 2020.")]
            assert (await mcp.call_tool("remember_batch", {"items": batch}))["isError"] is False
            assert (await mcp.call_tool("recall", {"query": "Lyon"}))["isError"] is False
            clock[0] += 60  # past the rest a failure earns
            assert (await mcp.call_tool("recall", {"query": "Porto"}))["isError"] is False
            page = samples((await c.simulate_get("/metrics", headers=scrape_headers())).text)
        await reranker.aclose()
    assert len(fake.requests) == 2
    assert value(page, "ownsona_rerank_duration_seconds_count") == 2
    assert value(page, "ownsona_rerank_errors_total") == 1


@pytest.mark.parametrize("mode", ["in-process", "redis"])
async def test_queue_depth_counts_writes_no_worker_has_taken(
    mode: str, clean_db: str, pool: Any, embedder: Any, request: pytest.FixtureRequest
) -> None:
    redis_url = request.getfixturevalue("redis_url") if mode == "redis" else None
    settings = ops_settings(redis_url=redis_url)
    bundle = make_broker(redis_url, namespace=QUEUE_NAMESPACE)  # no worker consumes
    actors = declare_actors(bundle.broker)
    queue = DramatiqWriteQueue(bundle, actors, timeout_s=30)
    runtime = Runtime(
        settings,
        Deps(settings=settings, pool=pool, embedder=embedder),
        queue,
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
    )
    try:
        async with falcon.testing.ASGIConductor(create_app(settings, runtime=runtime)) as c:
            empty = samples((await c.simulate_get("/metrics", headers=scrape_headers())).text)
            # Three writes sent as the write queue sends them, with nobody to take them.
            for n in range(3):
                message = actors.run_command.message(
                    {"user_id": 1}, {"command": "Remember", "text": f"f{n}"}
                )
                await asyncio.to_thread(bundle.broker.enqueue, message)
            page = samples((await c.simulate_get("/metrics", headers=scrape_headers())).text)
        assert value(empty, "ownsona_queue_depth", queue="ownsona-writes") == 0
        assert value(page, "ownsona_queue_depth", queue="ownsona-writes") == 3
        assert value(page, "ownsona_queue_depth", queue="ownsona-background") == 0
    finally:
        await queue.aclose()
        bundle.broker.close()


def test_metrics_settings_are_validated() -> None:
    from config.settings import SettingsError

    assert Settings.from_env({}).metrics_enabled is False
    on = Settings.from_env({"METRICS_ENABLED": "true", "METRICS_TOKEN": METRICS_TOKEN})
    assert on.metrics_enabled and on.metrics_token == METRICS_TOKEN
    for env, variable in (
        ({"METRICS_ENABLED": "maybe"}, "METRICS_ENABLED"),
        ({"METRICS_ENABLED": "1", "METRICS_TOKEN": "short"}, "METRICS_TOKEN"),
        ({"METRICS_ENABLED": "1", "METRICS_TOKEN": "has a space in it!!"}, "METRICS_TOKEN"),
        ({"METRICS_TOKEN": METRICS_TOKEN}, "METRICS_TOKEN"),  # a token for metrics that are off
        ({"LOG_LEVEL": "loud"}, "LOG_LEVEL"),
        ({"LOG_FORMAT": "xml"}, "LOG_FORMAT"),
    ):
        with pytest.raises(SettingsError) as info:
            Settings.from_env(env)
        assert info.value.variable == variable
        assert str(info.value).startswith(f"{variable}: ")
