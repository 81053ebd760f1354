"""Messages earlier releases queued, replayed on today's worker (tests/fixtures/queue_messages).

A rolling upgrade leaves messages of the previous release's web processes on
the queue, and keeps those processes sending while the workers are replaced:
today's worker must run every one of them, answer in today's payload shape
(the old web process passes it on as it is), and never store one twice when
the broker delivers it again. The fixtures are recorded by each release's own
code (their README); only the sentinel user and memory ids are mapped to rows
this test made.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dramatiq
import psycopg
import pytest

from memory.calls import COMMAND_FORMAT
from memory.deps import Deps
from memory.providers.extractors import RulesExtractor
from storage.pool import make_pool
from tasks.actors import FORMAT_OPTION, NewerFormat, WorkerResources, declare_actors
from tasks.broker import make_broker
from tests.conftest import QUEUE_NAMESPACE, worker_keyring
from tests.opened_rows import memory_texts
from tests.record_queue_messages import CLIENT_ID, MEMORY_IDS, USER_ID
from tests.tool_calls import USE_CASES

FIXTURES = Path(__file__).parent.parent / "fixtures" / "queue_messages"
#: Every release whose messages a worker of this release still runs.
RELEASES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
#: Texts of the memories the recorded edits name (MEMORY_IDS, in order).
STORED = (
    "My sister Ana lives in Faro.",
    "My old car is a red Fiat.",
    "My brother Rui works in Coimbra.",
)


def _load(release: str, name: str, ids: dict[int, int]) -> dramatiq.Message[Any]:
    data = json.loads((FIXTURES / release / f"{name}.json").read_text("utf-8"))
    # A message id of its own: results are stored by message id, and a replay must wait for
    # its own (the content, idempotency key and submission included, is the recording's).
    return dramatiq.Message(**{**_mapped(data, ids), "message_id": str(uuid.uuid4())})


def _mapped(value: Any, ids: dict[int, int]) -> Any:
    """``value`` with the recording's sentinel ids replaced by this test's rows."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return ids.get(value, value)
    if isinstance(value, list):
        return [_mapped(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: _mapped(v, ids) for k, v in value.items()}
    return value


def _resources(dsn: str, settings: Any, embedder: Any) -> WorkerResources:
    async def build() -> Deps:
        pool = make_pool(dsn, min_size=1, max_size=4, name="test-replay")
        await pool.open(wait=True)
        return Deps(
            settings=settings,
            pool=pool,
            embedder=embedder,
            extractor=RulesExtractor(),
            keyring=await worker_keyring(dsn),
        )

    async def close(d: Deps) -> None:
        await d.pool.close()
        if d.keyring is not None:
            await d.keyring.close()

    return WorkerResources(build, close)


@pytest.fixture(params=["in-process", "redis"])
def worker(request, clean_db, settings, embedder) -> Iterator[Any]:
    redis_url = request.getfixturevalue("redis_url") if request.param == "redis" else None
    bundle = make_broker(
        redis_url,
        namespace=QUEUE_NAMESPACE,
        extra_middleware=[_resources(clean_db, settings, embedder)],
    )
    declare_actors(bundle.broker)
    running = dramatiq.Worker(bundle.broker, worker_threads=2, worker_timeout=100)
    running.start()
    yield bundle
    running.stop()
    bundle.broker.close()


async def _stored(deps: Deps, user_id: int) -> dict[int, int]:
    """The rows the recorded calls name: the sentinel ids mapped to them."""
    ids = {USER_ID: user_id}
    for sentinel, text in zip(MEMORY_IDS, STORED, strict=True):
        payload = await USE_CASES["remember"](
            deps, user_id, {"text": text, "dedup_policy": "insert"}, idempotency_key=None
        )
        ids[sentinel] = payload["memory_id"]
    return ids


def _run(bundle: Any, message: dramatiq.Message[Any]) -> dict[str, Any]:
    """Enqueue ``message`` and wait for its result, as the web process that sent it does."""
    bundle.broker.enqueue(message)
    result: dict[str, Any] = bundle.backend.get_result(message, block=True, timeout=60_000)
    return result


def _one(dsn: str, query: str, *args: Any) -> Any:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(query, args).fetchone()
    assert row is not None
    return row[0] if len(row) == 1 else row


@pytest.mark.parametrize("release", RELEASES)
async def test_the_writes_of_an_earlier_release_land_once(release, worker, deps, clean_db, alice):
    ids = await _stored(deps, alice)
    count = "SELECT count(*) FROM memories WHERE user_id = %s"

    remember = _load(release, "remember", ids)
    first = _run(worker, remember)
    assert first["ok"] is True and first["message"] == "Ok" and isinstance(first["memory_id"], int)
    client = _one(
        clean_db, "SELECT written_by_client FROM memories WHERE id = %s", first["memory_id"]
    )
    text = dict(memory_texts(clean_db))[first["memory_id"]]
    assert text == "My sister Ana lives in Porto." and client == CLIENT_ID
    # Delivered again (a worker died before acknowledging it): the same answer, no new row.
    assert _run(worker, _load(release, "remember", ids)) == first
    assert _one(clean_db, count, alice) == 4

    batch = _run(worker, _load(release, "remember_batch", ids))
    assert batch["ok"] is True
    assert batch["summary"] == {"total": 2, "succeeded": 2, "failed": 0}
    assert _one(clean_db, count, alice) == 6

    update = _run(worker, _load(release, "update_memory", ids))
    assert update["ok"] is True
    assert dict(memory_texts(clean_db))[ids[MEMORY_IDS[0]]] == "My sister Ana lives in Lisbon now."

    forget = _run(worker, _load(release, "forget", ids))
    assert forget["ok"] is True
    assert _one(
        clean_db, "SELECT deleted_at IS NOT NULL FROM memories WHERE id = %s", ids[MEMORY_IDS[1]]
    )


@pytest.mark.parametrize("release", RELEASES)
async def test_the_extraction_jobs_of_an_earlier_release_run(
    release, worker, deps, clean_db, alice
):
    ids = await _stored(deps, alice)
    target = ids[MEMORY_IDS[2]]
    edges = "SELECT count(*) FROM memory_relations WHERE memory_id = %s"
    assert _one(clean_db, edges, target) == 0  # stored without extraction (no hook)
    message = _load(release, "extract_relations", ids)
    worker.broker.enqueue(message)
    # Fire and forget: nothing to await but the edges (a failed job would be retried later).
    deadline = time.monotonic() + 30
    while _one(clean_db, edges, target) == 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert _one(clean_db, edges, target) > 0


async def test_a_message_of_a_newer_format_is_refused_with_its_reason(
    worker, deps, clean_db, alice
):
    # A web process upgraded before the workers (the wrong order) sends a format this
    # worker cannot read: it runs nothing and says why, instead of guessing.
    ids = await _stored(deps, alice)
    message = _load("6540e3c", "remember", ids)
    message.args[0]["format"] = COMMAND_FORMAT + 1
    payload = _run(worker, message)
    assert payload["ok"] is False and payload["error"]["code"] == "INTERNAL_ERROR"
    assert "older OwnSona release" in payload["error"]["message"]
    assert "nothing was stored" in payload["error"]["message"]
    assert payload["error"]["detail"]["command_format"] == COMMAND_FORMAT + 1
    assert _one(clean_db, "SELECT count(*) FROM memories WHERE user_id = %s", alice) == 3


def test_this_release_says_its_format_in_every_write():
    from memory.calls import CallMeta

    assert CallMeta(1).to_json()["format"] == COMMAND_FORMAT


class _Outcomes(dramatiq.Middleware):
    """What each processed message raised (None: it ran)."""

    def __init__(self) -> None:
        self.raised: list[BaseException | None] = []

    def after_process_message(self, broker, message, *, result=None, exception=None):  # type: ignore[no-untyped-def]
        self.raised.append(exception)


async def test_an_extraction_job_of_a_newer_format_waits_for_a_newer_worker(
    deps, clean_db, alice, settings, embedder
):
    outcomes = _Outcomes()
    bundle = make_broker(
        None,
        namespace=QUEUE_NAMESPACE,
        extra_middleware=[_resources(clean_db, settings, embedder), outcomes],
    )
    declare_actors(bundle.broker)
    running = dramatiq.Worker(bundle.broker, worker_threads=1, worker_timeout=100)
    running.start()
    try:
        ids = await _stored(deps, alice)
        target = ids[MEMORY_IDS[2]]
        message = _load("6540e3c", "extract_relations", ids)
        bundle.broker.enqueue(
            message.copy(options={**message.options, FORMAT_OPTION: COMMAND_FORMAT + 1})
        )
        deadline = time.monotonic() + 30
        while not outcomes.raised and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        # Not run here: it failed on this worker, so Dramatiq retries it later, with back-off.
        assert [type(e) for e in outcomes.raised] == [NewerFormat]
        edges = "SELECT count(*) FROM memory_relations WHERE memory_id = %s"
        assert _one(clean_db, edges, target) == 0
    finally:
        running.stop()
        bundle.broker.close()
