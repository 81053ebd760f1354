"""Benchmark the local embedder: single-query latency and batch throughput.

Run ``python -m scripts.bench.embedder`` (``--help`` for the knobs). It
prints, for the shipped configuration (or the ``--threads`` and
``--sub-batch`` given):

- p50/p99 latency of ``embed_one`` on a short query, through the event loop
  and worker thread exactly as the server calls it, in milliseconds;
- sentences/s embedding 200 sentences of about 15 words in one ``embed``
  call, and its ratio to embedding them one ``embed_one`` at a time;
- p50/p99 latency of the same short query while such a batch is running.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time

from memory.providers.embedders import LOCAL_SUB_BATCH_SIZE, LocalEmbedder

QUERY = "where does my sister work?"

_SUBJECTS = [
    "My father",
    "My sister",
    "My partner",
    "Our son",
    "My manager",
    "My best friend",
    "The dog",
]
_VERBS = ["likes", "prefers", "usually takes", "never forgets", "always books", "strongly dislikes"]
_OBJECTS = [
    "oat milk in the morning coffee",
    "the early train to the office",
    "long walks along the river on Sundays",
    "spicy Thai food but never peanuts",
    "aisle seats on flights over three hours",
    "code reviews before lunch, not late",
    "the blue notebook for project ideas",
]
_TAILS = [
    "when it is sunny",
    "since moving to Berlin",
    "said at dinner",
    "except in winter",
    "every single time",
]


def sentences(count: int, seed: int = 7) -> list[str]:
    """``count`` distinct memory-like sentences of roughly 15 words."""
    rng = random.Random(seed)
    return [
        f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} "
        f"{rng.choice(_TAILS)}, note {n}."
        for n in range(count)
    ]


def _ms(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return 1000 * ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _query_latencies(embedder: LocalEmbedder, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await embedder.embed_one(QUERY)
        samples.append(time.perf_counter() - start)
    return samples


async def run(threads: int | None, sub_batch: int, queries: int, batch: int, rounds: int) -> None:
    start = time.perf_counter()
    embedder = LocalEmbedder.bundled(intra_op_threads=threads, sub_batch_size=sub_batch)
    load_s = time.perf_counter() - start
    texts = sentences(batch)
    words = statistics.mean(len(t.split()) for t in texts)

    await _query_latencies(embedder, 20)  # warm-up
    single = await _query_latencies(embedder, queries)

    await embedder.embed(texts)  # warm-up
    batch_s = []
    for _ in range(rounds):
        start = time.perf_counter()
        await embedder.embed(texts)
        batch_s.append(time.perf_counter() - start)
    best = min(batch_s)

    start = time.perf_counter()
    for text in texts:
        await embedder.embed_one(text)
    one_by_one = time.perf_counter() - start

    # A short query while a big batch is being embedded concurrently.
    during: list[float] = []
    for _ in range(rounds):
        running = asyncio.create_task(embedder.embed(texts))
        await asyncio.sleep(0.005)
        while not running.done():
            during.extend(await _query_latencies(embedder, 1))
        await running

    print(f"local embedder {embedder.model}: {embedder.dimensions} dims, loaded in {load_s:.2f}s")
    print(f"settings: intra_op_threads={threads or 'all cores'}, sub_batch={sub_batch}")
    print(
        f"single query ({queries} runs): p50 {_ms(single, 0.5):.2f} ms, "
        f"p99 {_ms(single, 0.99):.2f} ms"
    )
    print(
        f"batch of {batch} sentences (~{words:.0f} words, best of {rounds}): "
        f"{batch / best:.0f} sentences/s ({1000 * best:.0f} ms); "
        f"median {batch / statistics.median(batch_s):.0f}/s"
    )
    print(f"batch vs one at a time: {one_by_one / best:.2f}x faster")
    print(
        f"single query during a batch ({len(during)} runs): p50 {_ms(during, 0.5):.2f} ms, "
        f"p99 {_ms(during, 0.99):.2f} ms"
    )
    await embedder.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="intra-op threads (all cores)")
    parser.add_argument("--sub-batch", type=int, default=LOCAL_SUB_BATCH_SIZE)
    parser.add_argument("--queries", type=int, default=500, help="single-query runs")
    parser.add_argument("--batch", type=int, default=200, help="sentences per batch")
    parser.add_argument("--rounds", type=int, default=5, help="batch repetitions")
    args = parser.parse_args()
    asyncio.run(run(args.threads, args.sub_batch, args.queries, args.batch, args.rounds))


if __name__ == "__main__":
    main()
