"""The embedding coalescer: one thread, many callers' short texts per model call (issue 16).

The coalescer is given the function that runs one batch; here it is either
the real local model's or a plain function that records the batches it is
handed and can be held, so the tests assert what was batched with what and in
which order things finished, never how long anything took.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from memory.providers.embedders import LocalEmbedder
from memory.providers.embedding import Coalescer, FloatArray


class HeldRun:
    """A batch function that records each batch and, while held, blocks in the first one."""

    def __init__(self, *, fail_on: str | None = None) -> None:
        self.batches: list[list[str]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail_on = fail_on

    def __call__(self, texts: list[str]) -> FloatArray:
        self.batches.append(list(texts))
        self.entered.set()
        self.release.wait(30)
        if self.fail_on is not None and self.fail_on in texts:
            raise ValueError(f"cannot embed {self.fail_on!r}")
        # One row per text that names the text: [len, first char code].
        return np.array([[len(t), ord(t[0])] for t in texts], dtype=np.float32)


@pytest.fixture
def held() -> Iterator[HeldRun]:
    run = HeldRun()
    yield run
    run.release.set()


async def _occupy(coalescer: Coalescer, run: HeldRun, text: str) -> asyncio.Task[FloatArray]:
    """Start one call and wait until the thread is inside its batch (and so busy)."""
    first = asyncio.ensure_future(coalescer.embed_one(text))
    await asyncio.to_thread(run.entered.wait, 30)
    return first


async def _queued(coalescer: Coalescer, n: int) -> None:
    """Wait until ``n`` calls are queued behind the running batch (no sleeping)."""
    while len(coalescer._pending) < n:
        await asyncio.sleep(0)


async def test_texts_waiting_during_a_batch_run_as_one_next_batch(held: HeldRun) -> None:
    coalescer = Coalescer(held, max_batch=32)
    try:
        first = await _occupy(coalescer, held, "first")
        rest = [asyncio.ensure_future(coalescer.embed_one(t)) for t in ("a", "bb", "ccc")]
        await _queued(coalescer, 3)
        held.release.set()
        vectors = await asyncio.gather(first, *rest)
    finally:
        coalescer.close()
    assert held.batches == [["first"], ["a", "bb", "ccc"]]
    # Each caller got its own row, in its own order.
    assert [v.tolist() for v in vectors] == [
        [5, ord("f")],
        [1, ord("a")],
        [2, ord("b")],
        [3, ord("c")],
    ]


async def test_a_batch_is_at_most_max_batch_texts(held: HeldRun) -> None:
    coalescer = Coalescer(held, max_batch=2)
    try:
        first = await _occupy(coalescer, held, "first")
        rest = [asyncio.ensure_future(coalescer.embed_one(t)) for t in ("a", "b", "c", "d", "e")]
        await _queued(coalescer, 5)
        held.release.set()
        await asyncio.gather(first, *rest)
    finally:
        coalescer.close()
    assert held.batches == [["first"], ["a", "b"], ["c", "d"], ["e"]]


async def test_one_failing_text_fails_only_its_caller() -> None:
    run = HeldRun(fail_on="bad")
    coalescer = Coalescer(run, max_batch=32)
    try:
        first = await _occupy(coalescer, run, "first")
        rest = [asyncio.ensure_future(coalescer.embed_one(t)) for t in ("a", "bad", "b")]
        await _queued(coalescer, 3)
        run.release.set()
        outcomes = await asyncio.gather(first, *rest, return_exceptions=True)
    finally:
        run.release.set()
        coalescer.close()
    # The batch failed as a whole, then each text ran alone.
    assert run.batches == [["first"], ["a", "bad", "b"], ["a"], ["bad"], ["b"]]
    ok_first, ok_a, failed, ok_b = outcomes
    assert isinstance(failed, ValueError) and "bad" in str(failed)
    assert [v.tolist() for v in (ok_first, ok_a, ok_b)] == [  # type: ignore[union-attr]
        [5, ord("f")],
        [1, ord("a")],
        [1, ord("b")],
    ]


async def test_a_caller_that_gave_up_is_not_embedded_for(held: HeldRun) -> None:
    coalescer = Coalescer(held, max_batch=32)
    try:
        first = await _occupy(coalescer, held, "first")
        gone = asyncio.ensure_future(coalescer.embed_one("gone"))
        kept = asyncio.ensure_future(coalescer.embed_one("kept"))
        await _queued(coalescer, 2)
        gone.cancel()
        held.release.set()
        assert (await kept).tolist() == [4, ord("k")]
        await first
    finally:
        coalescer.close()
    assert held.batches == [["first"], ["kept"]]
    assert gone.cancelled()


async def test_the_event_loop_serves_a_database_read_while_the_model_runs(
    held: HeldRun, pool
) -> None:
    """An embedding-free read is not held behind an embedding (the inline model held it)."""
    coalescer = Coalescer(held, max_batch=32)
    try:
        embedding = await _occupy(coalescer, held, "a query being embedded")
        async with pool.connection() as conn:
            row = await (await conn.execute("SELECT count(*) FROM memories")).fetchone()
        assert row is not None
        # The read finished while the embedding is still inside the model.
        assert not embedding.done()
        held.release.set()
        await embedding
    finally:
        coalescer.close()


def test_callers_on_two_event_loops_share_the_thread(held: HeldRun) -> None:
    """The web process's loop and the in-process worker's loop use one coalescer."""
    coalescer = Coalescer(held, max_batch=32)
    results: dict[str, list[float]] = {}

    def other_loop() -> None:
        async def call() -> None:
            results["worker"] = (await coalescer.embed_one("from the worker loop")).tolist()

        asyncio.run(call())

    async def main() -> None:
        first = await _occupy(coalescer, held, "from the web loop")
        worker = threading.Thread(target=other_loop)
        worker.start()
        await _queued(coalescer, 1)
        held.release.set()
        results["web"] = (await first).tolist()
        await asyncio.to_thread(worker.join, 30)

    try:
        asyncio.run(main())
    finally:
        coalescer.close()
    assert results == {"web": [17, ord("f")], "worker": [20, ord("f")]}
    assert held.batches == [["from the web loop"], ["from the worker loop"]]


async def test_close_answers_what_is_queued_and_a_later_call_starts_again(held: HeldRun) -> None:
    coalescer = Coalescer(held, max_batch=32)
    first = await _occupy(coalescer, held, "first")
    queued = asyncio.ensure_future(coalescer.embed_one("queued"))
    await _queued(coalescer, 1)
    closing = asyncio.ensure_future(asyncio.to_thread(coalescer.close))
    held.release.set()
    await closing
    assert (await first).tolist() == [5, ord("f")]
    assert (await queued).tolist() == [6, ord("q")]
    assert (await coalescer.embed_one("again")).tolist() == [5, ord("a")]
    coalescer.close()


# --- on the real model ---------------------------------------------------------------


QUERIES = [
    "where does my sister live",
    "what am I allergic to",
    "my dog's name",
    "when is the quarterly report due",
    "favourite coffee order",
    "who is Priya",
    "ok",
    "what car do I drive and where do I usually park it on weekdays",
]


async def test_concurrent_queries_get_their_own_vectors(embedder: LocalEmbedder) -> None:
    expected = await embedder.embed(QUERIES)  # one batch, on the batch path
    sizes: list[int] = []

    def observe(provider: str, size: int, seconds: float, ok: bool) -> None:
        assert ok
        sizes.append(size)

    embedder.add_observer(observe)
    try:
        got = await asyncio.gather(*(embedder.embed_one(q) for q in QUERIES * 3))
    finally:
        embedder.remove_observer(observe)
    for vector, want in zip(got, list(expected) * 3, strict=True):
        np.testing.assert_allclose(vector, want, atol=1e-5)
    assert sum(sizes) == len(QUERIES) * 3  # every text in some model call, once


async def test_the_event_loop_runs_while_queries_are_embedded(embedder: LocalEmbedder) -> None:
    """The loop keeps turning while the model works (inline, the first answer came first)."""
    ticks = 0
    first_answer_at: int | None = None

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1

    async def query(text: str) -> None:
        nonlocal first_answer_at
        await embedder.embed_one(text)
        if first_answer_at is None:
            first_answer_at = ticks

    task = asyncio.create_task(ticker())
    try:
        await asyncio.gather(*(query(q) for q in QUERIES))
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert first_answer_at is not None and first_answer_at >= 3


async def test_recall_reports_the_embedders_failure(deps, alice) -> None:
    """The query is embedded beside the lexical side; the embedder's error is the one raised."""
    from dataclasses import replace

    from memory.errors import EMBEDDING_ERROR, MemoryServiceError
    from tests.tool_calls import run_tool

    # 600 tokens overflow the model's 512 positions: onnxruntime itself fails.
    failing = replace(deps, embedder=LocalEmbedder.bundled(max_tokens=600))
    with pytest.raises(MemoryServiceError) as caught:
        await run_tool(failing, alice, "recall", {"query": "cat " * 700})
    assert caught.value.code == EMBEDDING_ERROR
    # The connection went back to the pool: an embedding-free read still answers.
    assert (await run_tool(deps, alice, "count_memories", {}))["ok"] is True
