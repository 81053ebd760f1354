"""The database side of ``remember_batch`` and ``remember`` by the embedded cluster's page cache.

    python -m scripts.bench.cache [--n 100000] [--rounds 2] [--workdir .bench/cache]

A store of ``--n`` synthetic facts (``corpus.py``, embedded by the local model,
cached in the work directory) is probed and written exactly as
``remember_batch`` does inside its transaction: the near-duplicate probe
(``nearest_active``), the tombstone probe, the insert of 200 new rows (HNSW,
GIN, term statistics) and the commit. Rounds alternate PostgreSQL's default
``shared_buffers`` (128 MB) and the size OwnSona gives the embedded cluster
(``storage.embedded.shared_buffers_bytes``), each in a fresh process after a
restart of the cluster, so the same machine load hits both. The new rows are
deleted after each batch. Then 100 single ``remember`` transactions
(``core.raw_write_p50``: checks, insert, receipt, commit). Every figure is a
median.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path

import numpy as np
import psycopg

from memory.providers.embedders import LocalEmbedder
from memory.rules.text import normalize_text
from storage import memories as store
from storage.embedded import shared_buffers_bytes, start_embedded, stop_embedded
from storage.migrate import migrate
from storage.pool import make_pool

from . import corpus
from .core import embed_cached, raw_write_p50, seed
from .database import new_row

DEFAULT_CACHE = 128 * 2**20
BATCH = 200
#: Batches per round; the first warms the cache and is not counted.
BATCHES = 7
#: Single remembers per round, after the batches.
SINGLES = 100


def measure(workdir: Path, n: int, shared_buffers: int) -> dict[str, float]:
    dsn = start_embedded(workdir / "data", database="bench_cache", shared_buffers=shared_buffers)
    asyncio.run(migrate(dsn, dimensions=384))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO users (username, password_hash) VALUES ('bench', 'x') ON CONFLICT DO NOTHING"
        )
        row = conn.execute("SELECT id FROM users WHERE username = 'bench'").fetchone()
        assert row is not None
        user_id = int(row[0])
        have = conn.execute("SELECT count(*) FROM memories").fetchone()
        assert have is not None
    texts = list(corpus.facts(n))
    vectors = embed_cached(LocalEmbedder.bundled(), texts, workdir / f"facts-{n}.npy")
    if int(have[0]) < n:
        seed(dsn, user_id, texts, vectors, int(have[0]))
    rng = np.random.default_rng(7)

    async def run() -> dict[str, list[float]]:
        pool = make_pool(dsn, min_size=1, max_size=1, name="bench-cache")
        await pool.open(wait=True)
        steps = ("near-duplicate probe", "tombstone probe", "insert", "commit")
        times: dict[str, list[float]] = {name: [] for name in steps}
        async with pool.connection() as conn:
            for b in range(BATCHES):
                new_texts = [
                    f"Cache bench {b}-{i}: {t}"
                    for i, t in enumerate(corpus.facts(BATCH, seed=500 + b))
                ]
                # Near stored facts, as a person's new facts often are.
                near = vectors[rng.choice(n, BATCH)] + rng.normal(
                    0, 0.02, (BATCH, vectors.shape[1])
                )
                near = (near / np.linalg.norm(near, axis=1, keepdims=True)).astype(np.float32)
                rows = [
                    new_row(t, v, model="bench-cache", normalized=normalize_text(t))
                    for t, v in zip(new_texts, near, strict=True)
                ]
                marks = [time.perf_counter()]
                async with conn.transaction():
                    await store.nearest_active(conn, user_id, list(near), k=5, min_score=0.9)
                    marks.append(time.perf_counter())
                    await store.nearest_tombstones(conn, user_id, list(near), k=5, min_score=0.9)
                    marks.append(time.perf_counter())
                    await store.insert_memories(conn, user_id, rows)
                    marks.append(time.perf_counter())
                marks.append(time.perf_counter())
                if b > 0:
                    for name, (start, end) in zip(steps, pairwise(marks), strict=True):
                        times[name].append(end - start)
                await conn.execute("DELETE FROM memories WHERE embedding_model = 'bench-cache'")
        await pool.close()
        return times

    times = asyncio.run(run())
    out = {name: round(statistics.median(v) * 1000, 1) for name, v in times.items()}
    out["batch total"] = round(sum(out.values()), 1)
    singles = [f"Cache bench single {i}: {t}" for i, t in enumerate(texts[:SINGLES])]
    out["one remember"] = raw_write_p50(dsn, user_id, singles, vectors[:SINGLES])["p50"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=Path(".bench/cache"))
    parser.add_argument(
        "--child", type=int, help=argparse.SUPPRESS
    )  # shared_buffers of one measurement
    args = parser.parse_args()
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    if args.child:
        print(json.dumps(measure(workdir, args.n, args.child)))
        return
    sized = shared_buffers_bytes()
    results: dict[str, list[dict[str, float]]] = {
        "128 MB (PostgreSQL default)": [],
        f"{sized // 2**20} MB (OwnSona)": [],
    }
    try:
        for r in range(args.rounds):
            for label, size in zip(results, (DEFAULT_CACHE, sized), strict=True):
                stop_embedded(
                    workdir / "data"
                )  # cold start for each round: the restart applies the size
                out = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "scripts.bench.cache",
                        "--n",
                        str(args.n),
                        "--workdir",
                        str(workdir),
                        "--child",
                        str(size),
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                figures = json.loads(out.stdout.strip().splitlines()[-1])
                results[label].append(figures)
                print(f"round {r + 1}, shared_buffers {label}: {figures}", flush=True)
    finally:
        stop_embedded(workdir / "data")
    print(f"\n{args.n} memories, a batch of {BATCH}, medians of rounds (ms):")
    for label, rounds in results.items():
        medians = {k: round(statistics.median(r[k] for r in rounds), 1) for k in rounds[0]}
        print(f"  {label}: {medians}")


if __name__ == "__main__":
    main()
