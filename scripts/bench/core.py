"""Core server benchmark: recall, remember and remember_batch over HTTP, start-up, memory.

    python -m scripts.bench.core [--sizes 10000,100000] [--queries 300] [--workdir .bench]

Runs a real ``ownsona serve`` (embedded PostgreSQL, in-process worker, local
model) and measures, in the same run, the parts each tool is made of, so the
figures are ratios that survive a noisy machine:

- recall over HTTP vs (embedding p50 + raw search SQL p50), at each store size;
- remember through the queue vs (embedding p50 + raw write SQL p50);
- remember_batch of 200 as items/s against the raw embedder's batch throughput,
  at each store size;
- ``ownsona serve`` start to first answered ``tools/list`` on a warm data dir;
- resident memory of the serving process.

Stores are seeded with synthetic facts (``corpus.py``) embedded by the same
local model and copied straight into PostgreSQL (through the tools it would
take minutes more and measure nothing extra); embeddings are cached in the
work directory between runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import httpx
import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from memory.providers.embedders import LocalEmbedder
from memory.rules import ranking
from memory.rules.text import normalize_text
from scripts.processes import free_port
from storage import memories as store
from storage.embedded import start_embedded, stop_embedded

from . import corpus
from .database import copy_memories, new_row, on_one_connection
from .mcp_client import McpClient

#: Recalls before measuring (caches, prepared statements, allocator warm).
WARM_UP = 30
#: Alternating rounds of HTTP recall, embedding and raw SQL.
ROUNDS = 3


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(values_s: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values_s]
    return {"p50": round(pct(ms, 50), 2), "p99": round(pct(ms, 99), 2), "n": len(ms)}


class Server:
    """``ownsona serve`` in a subprocess with a bearer token for one user.

    With ``database_url`` it serves that database instead of the embedded one in
    ``workdir``; :meth:`token` mints tokens for other accounts of it too.
    """

    def __init__(self, workdir: Path, *, database_url: str | None = None) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **{
                k: v
                for k, v in os.environ.items()
                if k not in ("DATABASE_URL", "REDIS_URL", "OWNSONA_PUBLIC_URL")
            },
            "PORT": str(self.port),
            "OWNSONA_DATA_DIR": str(workdir / "data"),
            "OWNSONA_LOGIN_USERNAME": "bench",
            "OWNSONA_LOGIN_PASSWORD": "bench-password",
        }
        if database_url is not None:
            self.env["DATABASE_URL"] = database_url
        self.proc: subprocess.Popen[bytes] | None = None
        self.log: IO[str] | None = None
        self.client: McpClient | None = None

    def start(self) -> float:
        """Start and return seconds until the first answered tools/list."""
        # Closed in stop(): the server writes to it until then.
        self.log = open(self.workdir / "serve.log", "a")  # noqa: SIM115
        started = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "scripts.cli", "serve"],
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        probe = httpx.Client(timeout=5)
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"server exited; see {self.workdir / 'serve.log'}")
            try:
                # Minting a token needs the account, which the server creates on start.
                if self.client is None and probe.get(f"{self.url}/healthz").status_code == 200:
                    self.client = McpClient(self.url, self.token(), timeout_s=120)
                if self.client is not None:
                    reply = self.client.http.post(
                        "/mcp", json={"jsonrpc": "2.0", "id": 0, "method": "tools/list"}
                    )
                    if reply.status_code == 200 and "result" in reply.json():
                        elapsed = time.perf_counter() - started
                        probe.close()
                        return elapsed
            except httpx.HTTPError:
                pass
            time.sleep(0.02)

    def token(self, user: str = "bench") -> str:
        out = subprocess.run(
            [sys.executable, "-m", "scripts.cli", "token", "--user", user, "--ttl", "86400"],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip().splitlines()[-1]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(60)
        self.proc = None
        if self.log is not None:
            self.log.close()
            self.log = None

    def rss_mb(self) -> tuple[float, float]:
        assert self.proc is not None
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        fields = {
            line.split(":")[0]: line.split()[1]
            for line in status.splitlines()
            if line.startswith("Vm")
        }
        return int(fields["VmRSS"]) / 1024, int(fields["VmHWM"]) / 1024

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        assert self.client is not None
        return self.client.call(tool, arguments)


# --- seeding and the raw parts -------------------------------------------------


def embed_cached(embedder: LocalEmbedder, texts: list[str], cache: Path) -> np.ndarray:
    if cache.exists():
        vectors: np.ndarray = np.load(cache)
        if len(vectors) >= len(texts):
            return vectors[: len(texts)]
    vectors = asyncio.run(embedder.embed(texts))
    np.save(cache, vectors)
    return vectors


def seed(dsn: str, user_id: int, texts: list[str], vectors: np.ndarray, start: int) -> None:
    """COPY rows ``start..len(texts)`` into the user's store (HNSW index kept live)."""
    with psycopg.connect(dsn) as conn:
        register_vector(conn)
        with copy_memories(conn) as copy:
            for text, vector in zip(texts[start:], vectors[start:], strict=True):
                copy.write_row(
                    [
                        user_id,
                        text,
                        normalize_text(text),
                        vector,
                        "local",
                        "all-MiniLM-L6-v2-onnx-int8",
                        ["bench"],
                    ]
                )
    with psycopg.connect(dsn, autocommit=True) as conn:
        # Dead rows from an earlier run would otherwise still sit in the indexes.
        conn.execute("VACUUM ANALYZE memories")


def raw_search_times(
    dsn: str, user_id: int, questions: list[str], vectors: np.ndarray
) -> list[float]:
    """The SQL of one recall (hybrid: term statistics, lexical candidates, fused search),
    issued as memory.reading issues it, without the embedding."""

    async def run(conn: psycopg.AsyncConnection[Any]) -> list[float]:
        times = []
        for question, v in zip(questions, vectors, strict=True):
            t = time.perf_counter()
            counted = await store.query_term_stats(conn, user_id, question)
            terms = ranking.weigh_terms(counted.terms, counted.total)
            weighted = [(term.term, term.weight) for term in terms]
            ids = await store.lexical_candidates(
                conn,
                user_id,
                terms=weighted,
                probe=ranking.probe_terms(terms),
                candidates=ranking.lexical_candidate_count(8),
                exact=counted.exact,
                tags=[],
            )
            await store.search_hybrid(
                conn,
                user_id,
                v,
                candidates=ranking.candidate_count(8),
                exact=counted.exact,
                terms=weighted,
                lexical_ids=ids,
                tags=[],
            )
            times.append(time.perf_counter() - t)
        return times

    return on_one_connection(dsn, run, name="bench-raw")


def raw_write_p50(
    dsn: str, user_id: int, texts: list[str], vectors: np.ndarray
) -> dict[str, float]:
    """The SQL of one remember: duplicate, near-duplicate and tombstone checks, insert,
    receipt, and the commit that makes it durable (the rows are deleted afterwards)."""

    async def run(conn: psycopg.AsyncConnection[Any]) -> list[float]:
        times = []
        for text, v in zip(texts, vectors, strict=True):
            t = time.perf_counter()
            async with conn.transaction():
                normalized = normalize_text(text)
                await store.find_exact(conn, user_id, [normalized])
                await store.nearest_active(conn, user_id, [v], k=5, min_score=0.9)
                await store.nearest_tombstones(conn, user_id, [v], k=5, min_score=0.9)
                await store.insert_memories(
                    conn, user_id, [new_row(text, v, model="bench", normalized=normalized)]
                )
                await store.put_receipt(
                    conn, user_id, f"bench-{time.perf_counter_ns()}", "remember", {"ok": True}
                )
            times.append(time.perf_counter() - t)
        await conn.execute(
            "DELETE FROM memories WHERE user_id = %s AND embedding_model = 'bench'", (user_id,)
        )
        return times

    return summary(on_one_connection(dsn, run, name="bench-raw"))


def embed_times(embedder: LocalEmbedder, texts: list[str]) -> list[float]:
    async def run() -> list[float]:
        times = []
        for text in texts:
            t = time.perf_counter()
            await embedder.embed_one(text)
            times.append(time.perf_counter() - t)
        return times

    return asyncio.run(run())


def embed_p50(embedder: LocalEmbedder, texts: list[str]) -> dict[str, float]:
    return summary(embed_times(embedder, texts))


def batch_rates(
    server: Server, embedder: LocalEmbedder, batches: int, *, tag: int
) -> dict[str, float]:
    """remember_batch of 200 vs the raw embedder on the same kind of batch, alternating."""
    rates, raw_rates = [], []
    for b in range(batches):
        texts = [
            f"Batch {tag}-{b} item {i}: {t}" for i, t in enumerate(corpus.facts(200, seed=1000 + b))
        ]
        t = time.perf_counter()
        asyncio.run(embedder.embed(texts))
        raw_rates.append(200 / (time.perf_counter() - t))
        t = time.perf_counter()
        server.call("remember_batch", {"items": [{"text": x} for x in texts]})
        rates.append(200 / (time.perf_counter() - t))
    return {
        "items_per_s": round(statistics.median(rates), 1),
        "raw_embedder_per_s": round(statistics.median(raw_rates), 1),
        "fraction": round(statistics.median(rates) / statistics.median(raw_rates), 2),
    }


# --- the benchmark ---------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--workdir", default=".bench/core")
    parser.add_argument(
        "--fresh", action="store_true", help="delete the work directory's database first"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    workdir = Path(args.workdir).resolve()
    if args.fresh and (workdir / "data").exists():
        stop_embedded(workdir / "data")
        shutil.rmtree(workdir / "data")
    workdir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count()}

    embedder = LocalEmbedder.bundled()
    server = Server(workdir)
    server.start()  # creates (or reuses) the store and the account
    server.stop()
    # Warm data dir, PostgreSQL stopped too: what a restart of the machine costs.
    stop_embedded(workdir / "data")
    results["startup_warm_s"] = round(server.start(), 2)
    dsn = start_embedded(workdir / "data")
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT id FROM users WHERE username = 'bench'").fetchone()
        assert row is not None, "the server creates the bench account on start"
        user_id = row[0]
        conn.execute("DELETE FROM memories WHERE user_id = %s", (user_id,))
        conn.execute("DELETE FROM write_receipts WHERE user_id = %s", (user_id,))

    questions = corpus.questions(args.queries)
    query_vectors = asyncio.run(embedder.embed(questions))
    all_texts = list(corpus.facts(max(sizes)))
    print(f"embedding {len(all_texts)} facts (cached in {workdir})", flush=True)
    all_vectors = embed_cached(embedder, all_texts, workdir / f"facts-{len(all_texts)}.npy")

    seeded = 0
    for size in sizes:
        seed(dsn, user_id, all_texts[:size], all_vectors[:size], seeded)
        seeded = size
        for q in questions[:WARM_UP]:
            server.call("recall", {"query": q, "limit": 8})
        http, emb_t, sql_t = [], [], []
        # Rounds alternate the three measurements so a drifting machine hits all alike.
        for r in range(ROUNDS):
            part = slice(r * len(questions) // ROUNDS, (r + 1) * len(questions) // ROUNDS)
            for q in questions[part]:
                t = time.perf_counter()
                server.call("recall", {"query": q, "limit": 8})
                http.append(time.perf_counter() - t)
            emb_t += embed_times(embedder, questions[part])
            sql_t += raw_search_times(dsn, user_id, questions[part], query_vectors[part])
        h, emb, sql = summary(http), summary(emb_t), summary(sql_t)
        results[f"recall_{size}"] = {
            "http": h,
            "embed": emb,
            "sql": sql,
            "ratio_p50": round(h["p50"] / (emb["p50"] + sql["p50"]), 2),
            "p99_over_p50": round(h["p99"] / h["p50"], 2),
        }
        print(json.dumps({f"recall_{size}": results[f"recall_{size}"]}), flush=True)
        results[f"remember_batch_{size}"] = batch_rates(server, embedder, args.batches, tag=size)
        print(json.dumps({f"remember_batch_{size}": results[f"remember_batch_{size}"]}), flush=True)

    # remember through the queue (the store holds max(sizes) rows now).
    new_texts = [f"Bench write {i}: {t}" for i, t in enumerate(corpus.facts(args.writes, seed=99))]
    http = []
    for text in new_texts:
        t = time.perf_counter()
        server.call("remember", {"text": text})
        http.append(time.perf_counter() - t)
    probe_texts = [f"Raw write {i}: {t}" for i, t in enumerate(corpus.facts(args.writes, seed=98))]
    probe_vectors = asyncio.run(embedder.embed(probe_texts))
    emb = embed_p50(embedder, probe_texts)
    sql = raw_write_p50(dsn, user_id, probe_texts, probe_vectors)
    h = summary(http)
    results["remember"] = {
        "http": h,
        "embed": emb,
        "sql": sql,
        "ratio_p50": round(h["p50"] / (emb["p50"] + sql["p50"]), 2),
    }
    print(json.dumps({"remember": results["remember"]}), flush=True)

    rss, hwm = server.rss_mb()
    results["serve_rss_mb"] = round(rss, 1)
    results["serve_peak_rss_mb"] = round(hwm, 1)
    server.stop()
    print(json.dumps(results, indent=2))
    (workdir / "results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
