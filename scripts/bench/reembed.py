"""Benchmark ``ownsona reembed``: rows/s against the raw local embedder, in the same run.

Run ``python -m scripts.bench.reembed --rows 10000``. It starts an embedded
PostgreSQL in a temporary directory, stores ``--rows`` synthetic facts
(``corpus.py``) through ``remember_batch`` with an "older model" (random unit
vectors recorded as ``bench-old-model``, 384 dimensions like the local
model), then:

- in ``--rounds`` rounds, alternately embeds a slice of the texts with the
  local model (``--batch-size`` per call, one call at a time: the raw
  embedder's throughput) and re-embeds the same number of rows exactly as
  ``ownsona reembed`` does without Redis (in-process worker, batches in
  flight, in-place rewrite with its HNSW index upkeep, each round a whole run
  with its planning and start-up). Alternating keeps a shared machine's
  drifting load from favouring either side.

It prints both rates over all rounds and their ratio.

Target: ratio >= 0.8.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memory.deps import Deps
from memory.embedders import LOCAL_MODEL_ID, LocalEmbedder
from memory.service import USE_CASES
from memory.settings import Settings
from scripts import reembed
from scripts.bench import corpus
from storage.embedded import start_embedded, stop_embedded
from storage.migrate import migrate
from storage.pool import make_pool
from storage.users import insert_user

DIMENSIONS = 384


class _OldModel:
    """Stands in for the model the store was embedded with before: random unit vectors."""

    provider = "local"
    model = "bench-old-model"
    dimensions = DIMENSIONS

    def __init__(self) -> None:
        self._rng = np.random.default_rng(7)

    async def ensure_ready(self) -> int:
        return DIMENSIONS

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        v = self._rng.normal(size=(len(texts), DIMENSIONS)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    async def embed_one(self, text: str) -> np.ndarray:
        return (await self.embed([text]))[0]

    async def aclose(self) -> None:
        return None


async def _seed(dsn: str, texts: list[str]) -> None:
    pool = make_pool(dsn, min_size=1, max_size=2, name="bench-seed")
    await pool.open(wait=True)
    try:
        async with pool.connection() as conn:
            user = await insert_user(conn, "bench", "x")
        assert user is not None
        user_id = user.id
        deps = Deps(settings=Settings(database_url=dsn), pool=pool, embedder=_OldModel())  # type: ignore[arg-type]
        for start in range(0, len(texts), 200):
            items = [{"text": t, "dedup_policy": "insert"} for t in texts[start : start + 200]]
            await USE_CASES["remember_batch"](deps, user_id, {"items": items})
    finally:
        await pool.close()


async def _raw_rate(embedder: LocalEmbedder, texts: list[str], batch_size: int) -> float:
    started = time.perf_counter()
    for start in range(0, len(texts), batch_size):
        await embedder.embed(texts[start : start + batch_size])
    return len(texts) / (time.perf_counter() - started)


def _mark_stale(dsn: str, ids: list[int]) -> None:
    """Flag rows as embedded by the older model (the rest count as done)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE memories SET embedding_model = CASE WHEN id = ANY(%s) THEN 'bench-old-model'"
            " ELSE %s END",
            (ids, LOCAL_MODEL_ID),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved raw/re-embed rounds")
    parser.add_argument("--batch-size", type=int, default=reembed.DEFAULT_BATCH_SIZE)
    parser.add_argument("--in-flight", type=int, default=None)
    parser.add_argument(
        "--shared-buffers-mb", type=int, default=None,
        help="the embedded cluster's shared_buffers (default: what OwnSona gives it)",
    )
    args = parser.parse_args()

    texts = [f"{t} (note {i})" for i, t in enumerate(corpus.facts(args.rows))]
    chunk = -(-len(texts) // args.rounds)
    raw_s = reembed_s = 0.0
    done = 0
    with tempfile.TemporaryDirectory(prefix="ownsona-bench-reembed-") as tmp:
        workdir = Path(tmp)
        cache = args.shared_buffers_mb * 2**20 if args.shared_buffers_mb else None
        dsn = start_embedded(workdir / "data", shared_buffers=cache)
        try:
            asyncio.run(migrate(dsn, dimensions=DIMENSIONS))
            t0 = time.perf_counter()
            asyncio.run(_seed(dsn, texts))
            print(f"seeded {len(texts)} rows in {time.perf_counter() - t0:.1f} s", flush=True)
            embedder = LocalEmbedder.bundled()
            # Rows are ids 1..N in text order. Rounds alternate the raw embedder and the
            # re-embedding on equal slices, so a machine whose load drifts affects both alike.
            for r in range(args.rounds):
                lo, hi = r * chunk, min(len(texts), (r + 1) * chunk)
                _mark_stale(dsn, list(range(lo + 1, hi + 1)))
                t0 = time.perf_counter()
                asyncio.run(_raw_rate(embedder, texts[lo:hi], args.batch_size))
                raw_s += time.perf_counter() - t0
                summary = asyncio.run(
                    reembed.run(
                        Settings(database_url=dsn),
                        batch_size=args.batch_size,
                        in_flight=args.in_flight,
                        progress=None,
                    )
                )
                assert summary.done == hi - lo, summary
                reembed_s += summary.seconds
                done += summary.done
                print(f"round {r + 1}: {summary.line()}", flush=True)
        finally:
            stop_embedded(workdir / "data")
    raw = done / raw_s
    rate = done / reembed_s
    print(
        f"rows={done} rounds={args.rounds} batch={args.batch_size} raw={raw:.1f} rows/s "
        f"reembed={rate:.1f} rows/s ratio={rate / raw:.2f} (target >= 0.8)"
    )


if __name__ == "__main__":
    main()
