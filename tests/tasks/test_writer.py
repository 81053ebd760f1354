"""The app a write speaks for rides in the message options to the worker's insert.

In-process and over Redis, on a real Dramatiq worker. A message without the
option (what a web process older than migration 0014 queued) still runs, and
its row's writer is not recorded; nothing of an earlier message's writer
leaks into it on the same worker thread.
"""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from memory.writers import Writer
from tasks.queue import DramatiqWriteQueue
from tests.tasks.test_queue import _command, _start
from tests.tool_calls import meta_for


def _writer_of(dsn: str, memory_id: int) -> tuple[str | None, str | None]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT written_by_client, written_by_token FROM memories WHERE id = %s", (memory_id,)
        ).fetchone()
    assert row is not None
    return row[0], row[1]


@pytest.fixture(params=["in-process", "redis"])
def worker(request, clean_db, settings, embedder):
    redis_url = request.getfixturevalue("redis_url") if request.param == "redis" else None
    # One thread: consecutive messages run on the same thread, so a writer left set by
    # one message would show in the next.
    bundle, actors, running = _start(redis_url, clean_db, settings, embedder, threads=1)
    yield bundle, actors
    running.stop()
    bundle.broker.close()


async def test_the_submitted_writer_is_recorded_and_a_message_without_one_still_runs(
    worker, clean_db, alice
):
    bundle, actors = worker
    queue = DramatiqWriteQueue(bundle, actors, timeout_s=30)
    try:
        stored = await queue.submit(
            meta_for(alice, "w-1", writer=Writer("ownsona-cli", "jti-laptop")),
            _command("remember", {"text": "My bike is a blue Brompton."}),
        )
        assert stored["ok"], stored
        assert _writer_of(clean_db, stored["memory_id"]) == ("ownsona-cli", "jti-laptop")

        # A call that names no app (an operator script): no writer in the message's meta.
        anonymous = await queue.submit(
            meta_for(alice, "w-2"),
            _command("remember", {"text": "My bike lock code is on a card."}),
        )
        assert anonymous["ok"], anonymous
        assert _writer_of(clean_db, anonymous["memory_id"]) == (None, None)
    finally:
        await queue.aclose()


async def test_a_malformed_writer_in_the_message_is_not_recorded(worker, clean_db, alice):
    bundle, actors = worker
    meta = meta_for(alice, "w-3").to_json()
    meta["writer"] = {"client_id": 42}
    message = actors.run_command.message(
        meta, _command("remember", {"text": "My umbrella is green."}).to_json()
    )
    bundle.broker.enqueue(message)
    answer = await asyncio.to_thread(bundle.backend.get_result, message, block=True, timeout=30_000)
    assert answer["ok"], answer
    assert _writer_of(clean_db, answer["memory_id"]) == (None, None)
