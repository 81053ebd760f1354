"""Benchmark ``ownsona reembed``: rows/s against the raw local embedder, in the same run.

Run ``python -m scripts.bench.reembed --rows 5000 --rounds 3``. It starts an
embedded PostgreSQL in a temporary directory and, in each of ``--rounds``
rounds, on a database of its own:

- stores ``--rows`` synthetic facts (``corpus.py``) through ``remember_batch``
  with an "older model" (random unit vectors recorded as ``bench-old-model``,
  ``--old-dimensions`` wide, 384 like the local model by default), gives
  ``--learned-fraction`` of them a learned context and vacuums it (not timed);
- embeds the first half of the texts with the local model (``--batch-size``
  per call, one call at a time: the raw embedder's throughput), re-embeds the
  whole store exactly as ``ownsona reembed`` does without Redis (in-process
  worker, batches in flight, every index kept up to date, start-up and
  planning included: in place, or with another ``--old-dimensions`` into the
  staging column and the swap), then embeds the second half raw.
  The raw halves bracket the run, so a machine whose load drifts affects
  both sides alike.

Every round is one real run over a store that has only ever been written by
``remember_batch``: re-embedding leaves a dead row version (and an HNSW
entry) behind each row it rewrites, and a benchmark that re-marked rows
between runs on one store would measure that growing bloat and the
autovacuum it sets off, not the command.

It prints both rates over all rounds and their ratio, and for a dimension
switch how long each swap held the table (the server waits meanwhile).

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

from config.settings import Settings
from memory.calls import CallMeta
from memory.commands import RememberBatch
from memory.deps import Deps
from memory.handlers import dispatch
from memory.providers.embedders import LocalEmbedder
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

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self._rng = np.random.default_rng(7)

    async def ensure_ready(self) -> int:
        return self.dimensions

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        v = self._rng.normal(size=(len(texts), self.dimensions)).astype(np.float32)
        unit: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
        return unit

    async def embed_one(self, text: str) -> np.ndarray:
        vector: np.ndarray = (await self.embed([text]))[0]
        return vector

    async def aclose(self) -> None:
        return None


async def _seed(dsn: str, texts: list[str], dimensions: int = DIMENSIONS) -> None:
    pool = make_pool(dsn, min_size=1, max_size=2, name="bench-seed")
    await pool.open(wait=True)
    try:
        async with pool.connection() as conn:
            user = await insert_user(conn, "bench", "x")
        assert user is not None
        user_id = user.id
        deps = Deps(settings=Settings(database_url=dsn), pool=pool, embedder=_OldModel(dimensions))
        for start in range(0, len(texts), 200):
            items = [{"text": t, "dedup_policy": "insert"} for t in texts[start : start + 200]]
            command = RememberBatch.parse({"items": items}, deps.settings)
            await dispatch(deps, CallMeta(user_id), command)
    finally:
        await pool.close()


async def _raw_rate(embedder: LocalEmbedder, texts: list[str], batch_size: int) -> float:
    started = time.perf_counter()
    for start in range(0, len(texts), batch_size):
        await embedder.embed(texts[start : start + batch_size])
    return len(texts) / (time.perf_counter() - started)


def _settle(dsn: str, learned_fraction: float) -> None:
    """Give ``learned_fraction`` of the rows a learned context (as ``reinforce`` leaves
    them), then vacuum and analyze the store, as autovacuum long since has in one in use.

    Left to autovacuum, its pass over the new rows (and their HNSW graph) lands
    in the timed run: measured, the first round of a fresh store ran at 0.66 of
    the raw embedder while the next ones ran at 0.86-0.88.
    """
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        if learned_fraction > 0:
            every = max(1, round(1 / learned_fraction))
            conn.execute(
                "UPDATE memories SET context_centroid = embedding, context_count = 3"
                " WHERE id %% %s = 0",
                (every,),
            )
        conn.execute("VACUUM (ANALYZE) memories")


def _drop_database(admin_dsn: str, database: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(database)))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=5_000, help="the store re-embedded each round")
    parser.add_argument("--rounds", type=int, default=3, help="runs, each on a fresh store")
    parser.add_argument("--batch-size", type=int, default=reembed.DEFAULT_BATCH_SIZE)
    parser.add_argument("--in-flight", type=int, default=None)
    parser.add_argument(
        "--old-dimensions",
        type=int,
        default=DIMENSIONS,
        help="the older model's width; another than 384 measures a dimension switch (staged)",
    )
    parser.add_argument(
        "--learned-fraction",
        type=float,
        default=0.2,
        help="share of rows with a learned context before the run (the swap resets them)",
    )
    parser.add_argument(
        "--shared-buffers-mb",
        type=int,
        default=None,
        help="the embedded cluster's shared_buffers (default: what OwnSona gives it)",
    )
    args = parser.parse_args()

    texts = [f"{t} (note {i})" for i, t in enumerate(corpus.facts(args.rows))]
    half = len(texts) // 2
    raw_s = reembed_s = 0.0
    raw_rows = done = 0
    swap_s: list[float] = []
    with tempfile.TemporaryDirectory(prefix="ownsona-bench-reembed-") as tmp:
        data = Path(tmp) / "data"
        cache = args.shared_buffers_mb * 2**20 if args.shared_buffers_mb else None
        admin_dsn = start_embedded(data, database="postgres", shared_buffers=cache)
        embedder = LocalEmbedder.bundled()
        try:
            for r in range(args.rounds):
                database = f"bench_reembed_{r + 1}"
                dsn = start_embedded(data, database=database, shared_buffers=cache)
                asyncio.run(migrate(dsn, dimensions=args.old_dimensions))
                t0 = time.perf_counter()
                asyncio.run(_seed(dsn, texts, args.old_dimensions))
                _settle(dsn, args.learned_fraction)
                seeded_s = time.perf_counter() - t0
                print(f"round {r + 1}: seeded {len(texts)} rows in {seeded_s:.1f} s", flush=True)
                t0 = time.perf_counter()
                asyncio.run(_raw_rate(embedder, texts[:half], args.batch_size))
                round_raw_s = time.perf_counter() - t0
                summary = asyncio.run(
                    reembed.run(
                        Settings(database_url=dsn),
                        batch_size=args.batch_size,
                        in_flight=args.in_flight,
                        progress=None,
                    )
                )
                t0 = time.perf_counter()
                asyncio.run(_raw_rate(embedder, texts[half:], args.batch_size))
                round_raw_s += time.perf_counter() - t0
                raw_s += round_raw_s
                raw_rows += len(texts)
                assert summary.done == len(texts), summary
                reembed_s += summary.seconds
                if summary.swap_seconds is not None:
                    swap_s.append(summary.swap_seconds)
                done += summary.done
                print(
                    f"round {r + 1}: {summary.line()}; raw embedder "
                    f"{len(texts) / round_raw_s:.1f} rows/s",
                    flush=True,
                )
                _drop_database(admin_dsn, database)
        finally:
            stop_embedded(data)
    raw = raw_rows / raw_s
    rate = done / reembed_s
    swaps = f" swap={', '.join(f'{s * 1000:.0f}' for s in swap_s)} ms" if swap_s else ""
    print(
        f"rows={done} rounds={args.rounds} batch={args.batch_size} raw={raw:.1f} rows/s "
        f"reembed={rate:.1f} rows/s ratio={rate / raw:.2f} (target >= 0.8){swaps}"
    )


if __name__ == "__main__":
    main()
