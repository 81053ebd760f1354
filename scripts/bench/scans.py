"""Scan benchmark: find_near_duplicates and find_conflicts on a large store.

    python -m scripts.bench.scans [--n 100000] [--runs 3] [--workdir .bench/scans]

Seeds one user's store with ``--n`` synthetic personal facts
(``scan_corpus.py``: varied templates, ~4% light rewrites of earlier facts,
topic tags), embedded for real by the local model in batches, and copied
straight into PostgreSQL with COPY (the HNSW index is dropped during the copy
and rebuilt after, which is how a bulk import would do it; the store then has
the same index a live server builds). Embeddings are cached in the work
directory under a digest of the texts, and a store already holding exactly
those rows is reused, so a second run goes straight to the scans.

Then it calls the two use cases exactly as a worker does
(``memory.handlers.dispatch``) ``--runs`` times each and prints the wall time
of each run, the groups and pairs found, rows scanned per second, and one more
run timed piece by piece (reading the vectors, the neighbour search, the
union-find). ``--hnsw`` also times the fallback path for stores above
``memory.scans.IN_MEMORY_LIMIT`` (one pgvector HNSW query per row, batched). Uses the embedded PostgreSQL in ``--workdir`` unless
``--database-url`` is given (that database's ``bench-scans`` user is reset).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from config.settings import Settings
from memory.calls import CallMeta
from memory.commands import FindConflicts, FindNearDuplicates
from memory.deps import Deps
from memory.handlers import dispatch
from memory.providers.embedders import LocalEmbedder
from memory.rules import knn
from memory.rules.clusters import cluster_pairs
from memory.rules.text import normalize_text
from memory.scans import NEIGHBOURS, qualifying_pairs
from storage import scans as scan_store
from storage.embedded import start_embedded
from storage.migrate import migrate
from storage.pool import make_pool

from .database import copy_memories
from .scan_corpus import facts

USERNAME = "bench-scans"
_EMBED_BATCH = 1024
_INDEX_SQL = (
    "CREATE INDEX memories_embedding_hnsw ON memories USING hnsw (embedding vector_cosine_ops)"
)


def _embed_cached(embedder: LocalEmbedder, texts: list[str], workdir: Path) -> np.ndarray:
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    cache = workdir / f"scan-facts-{len(texts)}-{digest}.npy"
    if cache.exists():
        cached: np.ndarray = np.load(cache)
        return cached
    started = time.perf_counter()
    parts: list[np.ndarray] = []
    for i in range(0, len(texts), _EMBED_BATCH):
        parts.append(asyncio.run(embedder.embed(texts[i : i + _EMBED_BATCH])))
        done = min(i + _EMBED_BATCH, len(texts))
        rate = done / (time.perf_counter() - started)
        print(f"  embedded {done}/{len(texts)} ({rate:.0f}/s)", flush=True)
    vectors = np.concatenate(parts)
    np.save(cache, vectors)
    return vectors


def _user(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT id FROM users WHERE username = %s", (USERNAME,)).fetchone()
    if row is None:
        row = conn.execute(
            "INSERT INTO users (username, password_hash) VALUES (%s, 'x') RETURNING id", (USERNAME,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def seed(dsn: str, embedder: LocalEmbedder, n: int, workdir: Path) -> int:
    """Make the bench user's store hold exactly the first ``n`` facts; return the user id."""
    rows = facts(n)
    texts = [t for t, _ in rows]
    with psycopg.connect(dsn, autocommit=True) as conn:
        user_id = _user(conn)
        have = conn.execute(
            "SELECT count(*), coalesce(md5(string_agg(text, E'\\n' ORDER BY id)), '')"
            " FROM memories WHERE user_id = %s",
            (user_id,),
        ).fetchone()
    want = hashlib.md5("\n".join(texts).encode()).hexdigest()
    if have is not None and have[0] == n and have[1] == want:
        print(f"store already holds the {n} facts; reusing it", flush=True)
        return user_id
    print(f"embedding {n} facts (cached in {workdir})", flush=True)
    vectors = _embed_cached(embedder, texts, workdir)
    started = time.perf_counter()
    with psycopg.connect(dsn) as conn:
        register_vector(conn)
        conn.execute("DELETE FROM memories WHERE user_id = %s", (user_id,))
        conn.execute("DROP INDEX IF EXISTS memories_embedding_hnsw")
        with copy_memories(conn) as copy:
            for (text, tags), vector in zip(rows, vectors, strict=True):
                copy.write_row(
                    [
                        user_id,
                        text,
                        normalize_text(text),
                        vector,
                        embedder.provider,
                        embedder.model,
                        tags,
                    ]
                )
        conn.commit()
        copied = time.perf_counter() - started
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute(_INDEX_SQL)
        conn.commit()
        conn.execute("ANALYZE memories")
        conn.commit()
    print(
        f"seeded {n} rows: COPY {copied:.1f} s, HNSW build {time.perf_counter() - started - copied:.1f} s",
        flush=True,
    )
    return user_id


async def run_scans(
    dsn: str, embedder: LocalEmbedder, user_id: int, runs: int, hnsw: bool
) -> dict[str, Any]:
    settings = Settings()
    pool = make_pool(dsn, min_size=1, max_size=settings.db_pool_max, name="bench-scans")
    await pool.open(wait=True)
    deps = Deps(settings=settings, pool=pool, embedder=embedder)
    results: dict[str, Any] = {}
    try:
        async with pool.connection() as conn:
            active = await scan_store.active_count(conn, user_id)
        for tool, shared_tag in (("find_near_duplicates", False), ("find_conflicts", True)):
            times = []
            payload: dict[str, Any] = {}
            for _ in range(runs):
                started = time.perf_counter()
                scan = FindConflicts if shared_tag else FindNearDuplicates
                command = scan.parse({"max_groups": 500}, deps.settings)
                payload = await dispatch(deps, CallMeta(user_id), command)
                times.append(time.perf_counter() - started)
            threshold = payload["threshold"]
            results[tool] = {
                "rows": active,
                "threshold": threshold,
                "seconds": [round(t, 2) for t in times],
                "median_s": round(statistics.median(times), 2),
                "rows_per_s": round(active / statistics.median(times)),
                "groups_returned": payload["summary"]["groups"],
                "pairs_in_returned_groups": payload["summary"]["pairs"],
                "largest_group": max(
                    (g.get("size", len(g["ids"])) for g in payload["groups"]), default=0
                ),
                "parts_s": await _parts(deps, user_id, threshold, shared_tag),
            }
            if hnsw:
                started = time.perf_counter()
                await qualifying_pairs(
                    deps, user_id, threshold=threshold, shared_tag=shared_tag, in_memory_limit=0
                )
                results[tool]["hnsw_pairs_s"] = round(time.perf_counter() - started, 2)
            print(json.dumps({tool: results[tool]}), flush=True)
    finally:
        await pool.close()
    return results


async def _parts(deps: Deps, user_id: int, threshold: float, shared_tag: bool) -> dict[str, float]:
    """One more run, timed piece by piece: fetch, neighbour search, grouping."""
    started = time.perf_counter()
    async with deps.pool.connection() as conn:
        found = await scan_store.active_vectors(conn, user_id)
    fetched = time.perf_counter()
    probe = np.array([bool(t) for t in found.tags]) if shared_tag else None
    rows, cols, sims = knn.neighbour_pairs(
        found.vectors, k=NEIGHBOURS, min_similarity=threshold, probe=probe
    )
    searched = time.perf_counter()
    cluster_pairs(zip(rows.tolist(), cols.tolist(), sims.tolist(), strict=True))
    grouped = time.perf_counter()
    return {
        "fetch_vectors": round(fetched - started, 2),
        "neighbour_search": round(searched - fetched, 2),
        "union_find": round(grouped - searched, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="memories to seed (default 100000)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each scan")
    parser.add_argument("--workdir", type=Path, default=Path(".bench/scans"))
    parser.add_argument("--database-url", default=None, help="use this PostgreSQL instead")
    parser.add_argument(
        "--hnsw",
        action="store_true",
        help="also time the batched-HNSW path (stores over the in-memory limit)",
    )
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    embedder = LocalEmbedder.bundled()
    dsn = args.database_url or start_embedded(args.workdir / "data", database="ownsona_bench")
    asyncio.run(migrate(dsn, dimensions=embedder.dimensions))
    user_id = seed(dsn, embedder, args.n, args.workdir)
    results = asyncio.run(run_scans(dsn, embedder, user_id, args.runs, args.hnsw))
    results["cpus"] = os.cpu_count()
    results["date"] = time.strftime("%Y-%m-%d")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
