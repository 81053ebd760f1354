"""Recall latency: hybrid (lexical + vector) against vector-only, same store, same run.

    python -m scripts.bench.recall_latency [--sizes 10000,100000] [--queries 400] [--workdir .bench/recall-latency]

For each store size it seeds one user's store, then asks the same questions
every way, interleaved in random order (so all see the same machine noise),
through the service layer with a real pool and the local embedder:

- ``hybrid``: ``memory.reading.recall`` as the tools call it (term statistics
  and lexical candidates read while the query is embedded, then vector
  candidates joined by the lexical ones in one statement, fusion, the learned
  ranking);
- ``vector``: recall as it was before hybrid retrieval: embed, HNSW candidates
  (``storage.memories.search_by_vector``), the learned ranking, on the same
  database;
- ``vector, 0001``: the same vector-only recall on a second database built by
  migration 0001 alone, i.e. the row layout before migration 0002 (which keeps
  vectors in the row; see its comments): what recall cost before this change.

It prints p50/p99 in milliseconds with the ratios of the p50s, and the same
for the SQL alone (embedding left out, statements one after the other).

The corpus is English conversational text: every LoCoMo dialogue turn
(default data ``../shared/eval/locomo``; see its README for the source and
the CC BY-NC 4.0 license) and, to reach the size, a turn followed by a
sentence of another turn, drawn with a fixed seed; queries are the LoCoMo
questions. So word frequencies follow real conversation (the speakers' names
are in about every other memory, as a partner's name would be), but each
turn's words recur in about 1 of 2,000 memories, so no word is truly rare: a
harder case for the lexical probe than a real store. Rows are copied straight
into PostgreSQL (the term statistics are kept by the same triggers as through
the tools); embeddings are cached in the work directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

DEFAULT_DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "eval" / "locomo"
DATABASE = "recall_latency"
#: The same store under migration 0001 alone: recall as it was before 0002.
BEFORE_DATABASE = "recall_latency_0001"
MODEL = "all-MiniLM-L6-v2-onnx-int8"
ATTRIBUTION = (
    "Corpus and queries from LoCoMo (Maharana et al., ACL 2024, arXiv:2402.17753), "
    "snap-research/locomo, CC BY-NC 4.0 (non-commercial use only)."
)


# --- corpus --------------------------------------------------------------------


def corpus(data: Path, size: int, seed: int = 11) -> tuple[list[str], list[str]]:
    """``size`` distinct memory texts and the question list, deterministic for a seed."""
    turns: list[str] = []
    questions: list[str] = []
    for file in sorted(data.glob("*.json")):
        conv = json.loads(file.read_text("utf-8"))
        turns.extend(m["text"] for m in conv["memories"])
        questions.extend(q["question"] for q in conv["queries"])
    sentences = []
    for text in turns:
        body = text.split("] ", 1)[-1].split(": ", 1)[-1]
        sentences += [s.strip() for s in re.split(r"(?<=[.!?])\s+", body) if len(s.split()) >= 4]
    rng = random.Random(seed)
    texts = list(dict.fromkeys(turns))
    seen = set(texts)
    while len(texts) < size:
        text = rng.choice(turns) + " " + rng.choice(sentences)
        if text not in seen:
            seen.add(text)
            texts.append(text)
    random.Random(seed).shuffle(texts)
    return texts[:size], questions


def embeddings(texts: list[str], workdir: Path) -> np.ndarray:
    """Vectors of ``texts`` by the local model, cached by text in ``workdir``."""
    from memory.providers.embedders import LocalEmbedder

    names, vectors_file = workdir / "corpus.json", workdir / "corpus.npy"
    cached: dict[str, int] = {}
    stored = np.zeros((0, 384), dtype=np.float32)
    if names.exists() and vectors_file.exists():
        cached = {t: i for i, t in enumerate(json.loads(names.read_text("utf-8")))}
        stored = np.load(vectors_file)
    missing = [t for t in texts if t not in cached]
    if missing:
        print(f"embedding {len(missing)} texts (cached for the next run) ...", flush=True)
        embedder = LocalEmbedder.bundled()

        async def run() -> np.ndarray:
            parts = []
            for start in range(0, len(missing), 256):
                parts.append(
                    np.asarray(await embedder.embed(missing[start : start + 256]), dtype=np.float32)
                )
            await embedder.aclose()
            return np.vstack(parts)

        fresh = asyncio.run(run())
        order = list(cached) + missing
        stored = np.vstack([stored, fresh]) if len(stored) else fresh
        cached = {t: i for i, t in enumerate(order)}
        names.write_text(json.dumps(order), "utf-8")
        np.save(vectors_file, stored)
    return stored[[cached[t] for t in texts]]


# --- database ------------------------------------------------------------------


def fresh_databases(workdir: Path) -> tuple[str, str]:
    """A database migrated to this code, and one with migration 0001 only."""
    from storage.embedded import start_embedded
    from storage.migrate import migrate
    from storage.schema import available_migrations

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs, about XDG_RUNTIME_DIR
        admin = start_embedded(workdir / "data", database="postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        for name in (DATABASE, BEFORE_DATABASE):
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
            conn.execute(f"CREATE DATABASE {name}")
    dsn = start_embedded(workdir / "data", database=DATABASE)
    asyncio.run(migrate(dsn, dimensions=384))
    before = start_embedded(workdir / "data", database=BEFORE_DATABASE)
    with psycopg.connect(before, autocommit=True) as conn:
        conn.execute(available_migrations()[0].sql.replace("{dim}", "384"))
    return dsn, before


def seed(dsn: str, user_id: int, texts: Sequence[str], vectors: np.ndarray) -> float:
    """Copy rows into the user's store, rebuild the HNSW index, analyse; return seconds."""
    from memory.rules.text import normalize_text

    started = time.perf_counter()
    with psycopg.connect(dsn) as conn:
        register_vector(conn)
        conn.execute("DROP INDEX IF EXISTS memories_embedding_hnsw")
        with (
            conn.cursor() as cur,
            cur.copy(
                "COPY memories (user_id, text, normalized_text, embedding, embedding_provider,"
                " embedding_model) FROM STDIN WITH (FORMAT BINARY)"
            ) as copy,
        ):
            copy.set_types(["int8", "text", "text", "vector", "text", "text"])
            for text, vector in zip(texts, vectors, strict=True):
                copy.write_row([user_id, text, normalize_text(text), vector, "local", MODEL])
        conn.commit()  # the term statistics are counted here, by the deferred triggers
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute(
            "CREATE INDEX memories_embedding_hnsw ON memories USING hnsw (embedding vector_cosine_ops)"
        )
        conn.commit()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    return time.perf_counter() - started


# --- measuring -----------------------------------------------------------------


async def _vector_only(deps: Any, user_id: int, query: str, limit: int) -> list[dict[str, Any]]:
    """Recall as it was before hybrid retrieval (SUPPLEMENT §4): HNSW candidates, learned ranking."""
    from memory.recall.candidates import from_row
    from memory.rules import ranking
    from memory.shapes import match_shape
    from storage import memories as store

    embedding = await deps.embedder.embed_one(query)
    async with deps.pool.connection() as conn:
        found = await store.search_by_vector(
            conn, user_id, embedding, candidates=ranking.candidate_count(limit)
        )
    ordered = ranking.rank(
        [from_row(c) for c in found],
        w_s=deps.settings.rank_salience_weight,
        w_c=deps.settings.rank_context_weight,
        min_score=None,
        limit=limit,
        w_l=0.0,
    )
    return [match_shape(c.row, c.cosine) for c in ordered]


async def _sql_hybrid(pool: Any, user_id: int, query: str, vector: Any, limit: int) -> int:
    from memory.rules import ranking
    from storage import memories as store

    async with pool.connection() as conn:
        stats = await store.query_term_stats(conn, user_id, query)
        terms = ranking.weigh_terms(stats.terms, stats.total)
        probe = ranking.probe_terms(terms)
        weighted = [(t.term, t.weight) for t in terms]
        ids = await store.lexical_candidates(
            conn,
            user_id,
            terms=weighted,
            probe=probe,
            candidates=ranking.lexical_candidate_count(limit),
            exact=stats.exact,
        )
        await store.search_hybrid(
            conn,
            user_id,
            vector,
            candidates=ranking.candidate_count(limit),
            exact=stats.exact,
            terms=weighted,
            lexical_ids=ids,
        )
    return sum(t.docs for t in terms if t.term in set(probe))


async def _sql_vector(pool: Any, user_id: int, vector: Any, limit: int) -> None:
    from memory.rules import ranking
    from storage import memories as store

    async with pool.connection() as conn:
        await store.search_by_vector(
            conn, user_id, vector, candidates=ranking.candidate_count(limit)
        )


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


async def measure(
    dsn: str,
    before: str,
    user_id: int,
    questions: Sequence[str],
    count: int,
    limit: int,
    threads: int | None,
) -> dict[str, Any]:
    from config.settings import Settings
    from memory import reading
    from memory.calls import CallMeta
    from memory.commands import Recall
    from memory.deps import Deps
    from memory.providers.embedders import LocalEmbedder
    from storage.pool import make_pool

    embedder = LocalEmbedder.bundled(intra_op_threads=threads)
    pool = make_pool(dsn, min_size=2, max_size=4, name="bench")
    old_pool = make_pool(before, min_size=1, max_size=2, name="bench-0001")
    await pool.open(wait=True)
    await old_pool.open(wait=True)
    deps = Deps(settings=Settings(), pool=pool, embedder=embedder)
    old_deps = Deps(settings=Settings(), pool=old_pool, embedder=embedder)
    rng = random.Random(5)
    asked = [questions[i % len(questions)] for i in range(count)]
    vectors = list(np.asarray(await embedder.embed(asked)))
    names = ("vector, 0001", "vector", "hybrid", "sql vector, 0001", "sql vector", "sql hybrid")
    times: dict[str, list[float]] = {name: [] for name in names}
    probed: list[int] = []
    meta, settings = CallMeta(user_id), deps.settings
    try:
        for warm in asked[:30]:  # warm the caches and the model
            await reading.recall(
                deps, meta, Recall.parse({"query": warm, "limit": limit}, settings)
            )
            await _vector_only(deps, user_id, warm, limit)
            await _vector_only(old_deps, user_id, warm, limit)
        for query, vector in zip(asked, vectors, strict=True):
            # partial binds this query and vector now (a lambda would see the loop's last).
            runs: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
                (
                    "hybrid",
                    partial(
                        reading.recall,
                        deps,
                        meta,
                        Recall.parse({"query": query, "limit": limit}, settings),
                    ),
                ),
                ("vector", partial(_vector_only, deps, user_id, query, limit)),
                ("vector, 0001", partial(_vector_only, old_deps, user_id, query, limit)),
                ("sql hybrid", partial(_sql_hybrid, pool, user_id, query, vector, limit)),
                ("sql vector", partial(_sql_vector, pool, user_id, vector, limit)),
                ("sql vector, 0001", partial(_sql_vector, old_pool, user_id, vector, limit)),
            ]
            rng.shuffle(runs)
            for name, run in runs:
                started = time.perf_counter()
                result = await run()
                times[name].append((time.perf_counter() - started) * 1000)
                if name == "sql hybrid":
                    probed.append(int(result))
    finally:
        await pool.close()
        await old_pool.close()
        await embedder.aclose()
    out: dict[str, Any] = {
        name: {"p50": pct(v, 50), "p99": pct(v, 99)} for name, v in times.items()
    }
    out["probed rows (mean)"] = statistics.fmean(probed)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", default="10000,100000", help="store sizes, ascending (default %(default)s)"
    )
    parser.add_argument(
        "--queries", type=int, default=400, help="questions per size (default %(default)s)"
    )
    parser.add_argument(
        "--limit", type=int, default=8, help="recall limit (default 8, the tools' default)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        help="embedder intra-op threads (default: the shipped one, every CPU)",
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo-format directory")
    parser.add_argument("--workdir", type=Path, default=Path(".bench/recall-latency"))
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))

    args.workdir.mkdir(parents=True, exist_ok=True)
    print(ATTRIBUTION)
    texts, questions = corpus(args.data.resolve(), sizes[-1])
    vectors = embeddings(texts, args.workdir)
    dsn, before = fresh_databases(args.workdir)
    user_id = 0
    for target in (dsn, before):
        with psycopg.connect(target, autocommit=True) as conn:
            row = conn.execute(
                "INSERT INTO users (username, password_hash) VALUES ('bench', 'x') RETURNING id"
            ).fetchone()
        assert row is not None
        user_id = int(row[0])  # 1 in both

    results = []
    loaded = 0
    for size in sizes:
        took = seed(dsn, user_id, texts[loaded:size], vectors[loaded:size])
        seed(before, user_id, texts[loaded:size], vectors[loaded:size])
        loaded = size
        print(
            f"{size} memories seeded in {took:.0f}s; measuring {args.queries} questions ...",
            flush=True,
        )
        results.append(
            (
                size,
                asyncio.run(
                    measure(dsn, before, user_id, questions, args.queries, args.limit, args.threads)
                ),
            )
        )

    print()
    print(
        "| memories | path | vector, 0001 p50 / p99 | vector p50 / p99 | hybrid p50 / p99 "
        "| hybrid / vector | hybrid / vector, 0001 |"
    )
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for size, r in results:
        for label, prefix in (("recall", ""), ("SQL only", "sql ")):
            old, v, h = r[f"{prefix}vector, 0001"], r[f"{prefix}vector"], r[f"{prefix}hybrid"]
            print(
                f"| {size} | {label} | {old['p50']:.2f} / {old['p99']:.2f} | {v['p50']:.2f} / {v['p99']:.2f} "
                f"| {h['p50']:.2f} / {h['p99']:.2f} | {h['p50'] / v['p50']:.2f} | {h['p50'] / old['p50']:.2f} |"
            )
    for size, r in results:
        print(
            f"{size}: the lexical probe read {r['probed rows (mean)']:.0f} rows per query on average"
        )
    from storage.embedded import stop_embedded

    stop_embedded(args.workdir / "data")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
