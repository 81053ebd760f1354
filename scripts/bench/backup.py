"""Backup and restore throughput: ``ownsona export`` and ``ownsona import`` at N memories.

    python -m scripts.bench.backup [--n 100000] [--batch-size 200] [--workdir .bench/backup]

Runs the same code as the commands (``memory.backup``) against an embedded
PostgreSQL in the work directory:

- export: every memory of the source store to a JSON Lines file, rows/s;
- import: that file into an empty, migrated database (same cluster, full
  indexes and triggers), embedding every text with the local model, rows/s;
- the raw embedder on the same texts in the same batch size, measured just
  before and just after the import (sentences/s, the mean of the two), and
  import / raw embedder as the ratio that survives a noisy machine;
- the import run again (everything already present: no embedding), rows/s.

The source store is seeded straight into PostgreSQL with synthetic facts
(``corpus.py``): 10% tombstones, tags, learned salience and use counts, a
relation edge on every fifth memory, two accounts. Its vectors are random
unit vectors: export never reads them, and import computes its own. Its HNSW
index is dropped before seeding (export does not use it; building it for
random vectors would only make seeding slow).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from memory.backup import DEFAULT_IMPORT_BATCH, export_store, import_store
from memory.providers.embedders import LOCAL_MODEL_ID, LocalEmbedder
from memory.rules.text import normalize_text
from storage.embedded import start_embedded
from storage.migrate import migrate
from storage.pool import make_pool

from . import corpus
from .database import copy_memories

DIMENSIONS = 384
_FORGOTTEN_AT = datetime(2026, 6, 1, tzinfo=UTC)
_FIRST_CREATED = datetime(2025, 11, 30, tzinfo=UTC)
#: What the seed fills beyond database.SEED_COLUMNS: learning, tombstones, a year of dates.
_EXTRA_COLUMNS = (
    ("importance", "float8"),
    ("salience", "float8"),
    ("use_count", "int4"),
    ("deleted_at", "timestamptz"),
    ("forget_reason", "text"),
    ("created_at", "timestamptz"),
    ("updated_at", "timestamptz"),
)


def _seed(dsn: str, n: int) -> None:
    """``n`` memories: 90% for account 'bench', 10% for 'bench2'."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        have = conn.execute("SELECT count(*), count(DISTINCT created_at) FROM memories").fetchone()
        if have is not None and have[0] == have[1] == n:
            return
        conn.execute("TRUNCATE memories, memory_relations, users RESTART IDENTITY CASCADE")
        conn.execute("DROP INDEX IF EXISTS memories_embedding_hnsw")
        users = [
            conn.execute(
                "INSERT INTO users (username, password_hash) VALUES (%s, 'x') RETURNING id", (name,)
            ).fetchone()[0]  # type: ignore[index]
            for name in ("bench", "bench2")
        ]
    rng = np.random.default_rng(3)
    tags: tuple[list[str], ...] = (
        ["family"],
        ["work", "city"],
        [],
        ["habits"],
        ["health", "people", "dates"],
    )
    with psycopg.connect(dsn) as conn:
        register_vector(conn)
        with copy_memories(conn, _EXTRA_COLUMNS) as copy:
            for i, text in enumerate(corpus.facts(n)):
                vector = rng.standard_normal(DIMENSIONS).astype(np.float32)
                vector /= np.linalg.norm(vector)
                forgotten = i % 10 == 9
                copy.write_row(
                    [
                        users[1] if i % 10 == 3 else users[0],
                        text,
                        normalize_text(text),
                        vector,
                        "local",
                        LOCAL_MODEL_ID,
                        tags[i % len(tags)],
                        round(float(rng.uniform(0, 1)), 3),
                        round(float(rng.uniform(-0.5, 0.8)), 4) if i % 3 == 0 else 0.0,
                        int(i % 7),
                        _FORGOTTEN_AT if forgotten else None,
                        "outdated" if forgotten else None,
                        # A memory every 5 minutes over the past year, as a real store has.
                        _FIRST_CREATED + timedelta(minutes=5 * i),
                        _FIRST_CREATED + timedelta(minutes=5 * i + 1),
                    ]
                )
        conn.execute(
            "INSERT INTO memory_relations (user_id, memory_id, subject, predicate, object)"
            " SELECT user_id, id, 'user', 'knows', 'person ' || (id % 97) FROM memories WHERE id % 5 = 0"
        )
        conn.commit()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE memories")


def _fresh_target(admin_dsn: str, name: str) -> None:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")


async def _raw_embed_rate(embedder: LocalEmbedder, texts: list[str], batch_size: int) -> float:
    started = time.perf_counter()
    for start in range(0, len(texts), batch_size):
        await embedder.embed(texts[start : start + batch_size])
    return len(texts) / (time.perf_counter() - started)


async def _run(args: argparse.Namespace) -> dict[str, object]:
    workdir = Path(args.workdir)
    source = start_embedded(workdir, database="backup_source")
    target = start_embedded(workdir, database="backup_target")
    await migrate(source, dimensions=DIMENSIONS)
    seeded = time.perf_counter()
    await asyncio.to_thread(_seed, source, args.n)
    seed_s = time.perf_counter() - seeded
    _fresh_target(source, "backup_target")
    await migrate(target, dimensions=DIMENSIONS)

    embedder = LocalEmbedder.bundled()
    dump = workdir / f"backup-{args.n}.jsonl"
    results: dict[str, object] = {"memories": args.n, "batch_size": args.batch_size}
    async with make_pool(source, min_size=1, max_size=2, name="bench-source") as pool:
        started = time.perf_counter()
        with dump.open("w", encoding="utf-8") as out:
            summary = await export_store(pool, out.write)
        export_s = time.perf_counter() - started
    assert summary.memories == args.n
    results["export"] = {
        "seconds": round(export_s, 2),
        "rows_per_s": round(args.n / export_s),
        "file_mb": round(dump.stat().st_size / 1e6, 1),
    }

    sample = list(corpus.facts(args.sample))
    raw_before = await _raw_embed_rate(embedder, sample, args.batch_size)
    async with make_pool(target, min_size=1, max_size=3, name="bench-target") as pool:
        started = time.perf_counter()
        imported = await import_store(pool, embedder, dump, batch_size=args.batch_size)
        import_s = time.perf_counter() - started
        raw_after = await _raw_embed_rate(embedder, sample, args.batch_size)
        started = time.perf_counter()
        again = await import_store(pool, embedder, dump, batch_size=args.batch_size)
        rerun_s = time.perf_counter() - started
    assert imported.inserted == args.n and again.inserted == 0
    raw = (raw_before + raw_after) / 2
    import_rate = args.n / import_s
    results["import"] = {
        "seconds": round(import_s, 1),
        "rows_per_s": round(import_rate),
        "raw_embedder_sentences_per_s": {"before": round(raw_before), "after": round(raw_after)},
        "ratio_to_raw_embedder": round(import_rate / raw, 2),
    }
    results["import_again_all_present"] = {
        "seconds": round(rerun_s, 1),
        "rows_per_s": round(args.n / rerun_s),
    }
    results["seed_seconds"] = round(seed_s, 1)
    return results


def main() -> None:
    from storage.embedded import stop_embedded

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=DEFAULT_IMPORT_BATCH)
    parser.add_argument(
        "--sample", type=int, default=4000, help="texts for the raw embedder figure"
    )
    parser.add_argument("--workdir", default=".bench/backup")
    args = parser.parse_args()
    try:
        print(json.dumps(asyncio.run(_run(args)), indent=2))
    finally:
        stop_embedded(Path(args.workdir))  # the machine is shared: free it


if __name__ == "__main__":
    main()
