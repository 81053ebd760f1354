"""Many tenants: recall, writes and scans for one user among 1,001 sharing a store.

    python -m scripts.bench.tenants [--small-users 1000] [--small-rows 1000]
        [--big-rows 100000] [--queries 200] [--workdir .bench/tenants] [--citus]

One embedded PostgreSQL cluster in ``--workdir`` holds four databases, each
served by its own real ``ownsona serve`` (``core.Server``, over HTTP):

- ``tenants``: ``--small-users`` users with ``--small-rows`` memories each and one
  user with ``--big-rows`` (1.1M rows by default), the rows of all users
  interleaved in the table as years of writes would leave them;
- ``lone_small``, ``lone_10k``, ``lone_big``: one user alone with
  ``--small-rows``, 10,000 and ``--big-rows`` memories: the baselines.

With ``--citus`` the ``tenants`` database is on a Citus coordinator and two workers
instead (``tenants_citus.py``), the baselines staying on the one node: issue 32's
"tenants bench on 2 workers". It is seeded afresh on each such run.

Measured, with the baselines in alternating rounds so a drifting machine hits
all alike:

- ``recall`` over HTTP, p50 / p99, for a small tenant, the big tenant and the
  lone users; recall@10 of the vector search (``storage.memories.search_by_vector``
  with recall's candidate count, on a connection set up as the server's) against
  exact search (numpy over the user's own vectors, read back from the database);
- for the small tenant and the lone small user: ``remember_batch`` of 200,
  ``find_near_duplicates`` and ``find_conflicts`` (the rows written are deleted
  again, so the cached store stays as seeded);
- the serving process's resident memory, PostgreSQL's size on disk per memory.

Vectors. Embedding 1.1M texts would take this machine ~1.5 hours, so the stored
vectors are synthesized from ``--base`` real MiniLM embeddings of synthetic facts
(``corpus.py``): each is ``a * x + (1 - a) * y + noise``, normalised, for two
random real vectors ``x``, ``y``, ``a`` uniform in [0.5, 1] and Gaussian noise of
0.01 per component (~0.2 in norm). A stored row then sits near one real fact and
leans towards another, as memories about the same people and places do, with
no two rows equal. Every user draws from the same base, so each user's rows are
spread over the same regions of the space as everyone else's: the case where a
filtered HNSW scan has to step over other users' rows. Queries are real
embeddings of questions (``corpus.questions``). Texts are ``corpus.facts`` (the
lexical side of hybrid recall sees real words); they do not match the vectors.

Seeding: COPY with the table's secondary indexes dropped, then rebuilt (HNSW
with a large ``maintenance_work_mem``), ``relation_outbox`` emptied (the rows stand
for memories whose extraction ran long ago), VACUUM ANALYZE. A database whose
layout matches the arguments is reused, so a rerun starts measuring at once.
Then the own HNSW index of each user who qualifies (``memory.own_indexes``: the
big tenant) is built, timed, as the server's first pass would at start-up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from memory.own_indexes import keep_own_indexes
from memory.providers.embedders import LocalEmbedder
from memory.rules import ranking
from memory.rules.text import normalize_text
from storage import memories as store
from storage.embedded import start_embedded
from storage.migrate import migrate
from storage.pool import make_pool

from . import corpus
from .core import Server, embed_cached, summary
from .database import copy_memories, on_one_connection
from .tenants_citus import (
    CITUS_INDEX_BUILD,
    count_terms_if_missing,
    disk_per_memory_on_citus,
    tenants_on_citus,
)

#: Rows per COPY statement while seeding (one statement's trigger work stays bounded).
_COPY_CHUNK = 50_000
#: Recalls before measuring each user.
WARM_UP = 20
#: Run before each index build on the single node (``tenants_citus`` has Citus's).
ONE_NODE_INDEX_BUILD = (
    "SET maintenance_work_mem = '3GB'",
    "SET max_parallel_maintenance_workers = 1",
)
#: Synthesis: per-component noise and the range of the first vector's share.
NOISE = 0.01
MIX_LOW = 0.5


def synthesize(base: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` unit vectors, each a mix of two rows of ``base`` plus small noise."""
    first = rng.integers(0, len(base), n)
    second = rng.integers(0, len(base), n)
    share = rng.uniform(MIX_LOW, 1.0, (n, 1)).astype(np.float32)
    mixed: np.ndarray = share * base[first] + (1 - share) * base[second]
    mixed += rng.normal(0.0, NOISE, mixed.shape).astype(np.float32)
    mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
    return mixed.astype(np.float32)


# --- seeding -------------------------------------------------------------------------


def _interleaved(counts: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(owner index, row number within the owner) of every row, each owner's rows
    spread evenly over the table."""
    owner = np.repeat(np.arange(len(counts)), counts)
    rank = np.concatenate([np.arange(c) for c in counts])
    position = (rank + 0.5) / np.asarray(counts)[owner]
    order = np.argsort(position, kind="stable")
    return owner[order], rank[order]


def _admin(dsn: str) -> str:
    return psycopg.conninfo.make_conninfo(dsn, dbname="postgres")


def _layout_matches(dsn: str, layout: dict[str, int]) -> bool:
    try:
        with psycopg.connect(dsn) as conn:
            row = conn.execute(
                "SELECT value FROM store_meta WHERE key = 'bench_tenants_layout'"
            ).fetchone()
    except psycopg.Error:
        return False
    return row is not None and json.loads(row[0]) == layout


def recreate(dsn: str, database: str) -> None:
    """Drop ``database`` and create it empty (on the one node)."""
    with psycopg.connect(_admin(dsn), autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))


def seed(
    dsn: str,
    database: str,
    layout: dict[str, int],
    base: np.ndarray,
    texts: list[str],
    *,
    fresh: Callable[[str, str], None] | None = recreate,
    index_build: Sequence[str] = ONE_NODE_INDEX_BUILD,
) -> None:
    """Make ``database`` hold exactly ``layout`` (username -> memories), or keep it if it does.

    ``fresh`` empties the database first (None: it is new already, as on a new Citus
    cluster); ``index_build`` is run before each index build, in its transaction.
    """
    if _layout_matches(dsn, layout):
        print(f"{database}: reusing the seeded store", flush=True)
        return
    started = time.perf_counter()
    if fresh is not None:
        fresh(dsn, database)
    asyncio.run(migrate(dsn, dimensions=base.shape[1]))
    names, counts = list(layout), list(layout.values())
    with psycopg.connect(dsn) as conn:
        register_vector(conn)
        ids = [
            conn.execute(
                "INSERT INTO users (username, password_hash) VALUES (%s, 'x') RETURNING id", (n,)
            ).fetchone()[0]  # type: ignore[index]
            for n in names
        ]
        # Every index but the ones behind a key (the primary key, 0020's (user_id, id)):
        # those cannot be dropped on their own, and each insert needs them anyway.
        indexes = conn.execute(
            "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x"
            " JOIN pg_class i ON i.oid = x.indexrelid"
            " WHERE x.indrelid = 'memories'::regclass"
            " AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)"
        ).fetchall()
        for name, _ in indexes:
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(name)))
        conn.commit()
        owner, rank = _interleaved(counts)
        for chunk, start in enumerate(range(0, len(owner), _COPY_CHUNK)):
            part = slice(start, start + _COPY_CHUNK)
            vectors = synthesize(base, len(owner[part]), np.random.default_rng(chunk))
            with copy_memories(conn) as copy:
                for o, r, v in zip(owner[part], rank[part], vectors, strict=True):
                    text = texts[r]
                    copy.write_row(
                        [ids[o], text, normalize_text(text), v, "local", "synthesized", ["bench"]]
                    )
            conn.commit()
            print(f"{database}: copied {min(start + _COPY_CHUNK, len(owner))} rows", flush=True)
        copied = time.perf_counter()
        for name, definition in indexes:
            t = time.perf_counter()
            for setting in index_build:
                conn.execute(setting)
            conn.execute(definition)
            conn.commit()
            print(f"{database}: {name} built in {time.perf_counter() - t:.0f} s", flush=True)
        conn.commit()
        count_terms_if_missing(dsn, ids)
        conn.execute("DELETE FROM relation_outbox")
        conn.execute(
            "INSERT INTO store_meta (key, value) VALUES ('bench_tenants_layout', %s)",
            (json.dumps(layout),),
        )
        conn.commit()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    print(
        f"{database}: seeded {len(owner)} rows: COPY {copied - started:.0f} s,"
        f" indexes and vacuum {time.perf_counter() - copied:.0f} s",
        flush=True,
    )


# --- measuring -------------------------------------------------------------------------


class Tenant:
    """One account of one served database, with its own MCP client."""

    def __init__(self, label: str, server: Server, dsn: str, username: str) -> None:
        self.label, self.server, self.dsn, self.username = label, server, dsn, username
        from .mcp_client import McpClient

        self.client = McpClient(server.url, server.token(username), timeout_s=600)
        with psycopg.connect(dsn) as conn:
            row = conn.execute("SELECT id FROM users WHERE username = %s", (username,)).fetchone()
            assert row is not None
            self.user_id = int(row[0])
            top = conn.execute(
                "SELECT coalesce(max(id), 0) FROM memories WHERE user_id = %s", (self.user_id,)
            ).fetchone()
            assert top is not None
            self.seeded_max_id = int(top[0])

    def timed(self, tool: str, arguments: dict[str, Any]) -> float:
        t = time.perf_counter()
        self.client.call(tool, arguments)
        return time.perf_counter() - t

    def forget_written(self) -> None:
        """Delete what the measured writes added, so the cached store stays as seeded."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                "DELETE FROM memories WHERE user_id = %s AND id > %s",
                (self.user_id, self.seeded_max_id),
            )
            conn.execute("DELETE FROM relation_outbox WHERE user_id = %s", (self.user_id,))


def recall_at_10(tenant: Tenant, queries: np.ndarray) -> dict[str, float]:
    """Vector search (recall's candidate count) against exact top-10, and its SQL latency."""
    with psycopg.connect(tenant.dsn) as conn:
        rows = conn.execute(
            "SELECT id, embedding::real[] FROM memories WHERE user_id = %s AND deleted_at IS NULL",
            (tenant.user_id,),
        ).fetchall()
    ids = np.array([r[0] for r in rows])
    matrix = np.stack([np.asarray(r[1], dtype=np.float32) for r in rows])
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    exact = [set(ids[np.argsort(-(matrix @ q))[:10]].tolist()) for q in queries]
    candidates = ranking.candidate_count(10)

    async def run(conn: psycopg.AsyncConnection[Any]) -> tuple[list[float], list[float]]:
        hits, times = [], []
        for q, truth in zip(queries, exact, strict=True):
            t = time.perf_counter()
            found = await store.search_by_vector(conn, tenant.user_id, q, candidates=candidates)
            times.append(time.perf_counter() - t)
            top = sorted(found, key=lambda s: -s.cosine)[:10]
            hits.append(len(truth & {s.row.id for s in top}) / 10)
        return hits, times

    hits, times = on_one_connection(tenant.dsn, run, name="bench-tenants")
    return {"recall_at_10": round(float(np.mean(hits)), 4), "sql": summary(times)}  # type: ignore[dict-item]


def measure_recall(
    tenants: list[Tenant], questions: list[str], query_vectors: np.ndarray, rounds: int
) -> dict[str, Any]:
    for tenant in tenants:
        for q in questions[:WARM_UP]:
            tenant.client.call("recall", {"query": q, "limit": 8})
    times: dict[str, list[float]] = {t.label: [] for t in tenants}
    for r in range(rounds):
        part = slice(r * len(questions) // rounds, (r + 1) * len(questions) // rounds)
        for tenant in tenants:
            times[tenant.label] += [
                tenant.timed("recall", {"query": q, "limit": 8}) for q in questions[part]
            ]
    out: dict[str, Any] = {}
    for tenant in tenants:
        out[tenant.label] = {"http": summary(times[tenant.label])}
        out[tenant.label].update(recall_at_10(tenant, query_vectors))
        print(json.dumps({f"recall {tenant.label}": out[tenant.label]}), flush=True)
    return out


def measure_small_user_work(pair: list[Tenant], batches: int, scans: int) -> dict[str, Any]:
    """remember_batch of 200, find_near_duplicates, find_conflicts, alternating users."""
    out: dict[str, dict[str, list[float]]] = {t.label: {} for t in pair}
    for b in range(batches):
        texts = [
            f"Tenant batch {b} item {i}: {x}" for i, x in enumerate(corpus.facts(200, seed=500 + b))
        ]
        for tenant in pair:
            out[tenant.label].setdefault("remember_batch", []).append(
                tenant.timed("remember_batch", {"items": [{"text": x} for x in texts]})
            )
    for tenant in pair:
        tenant.forget_written()
    for _ in range(scans):
        for tool in ("find_near_duplicates", "find_conflicts"):
            for tenant in pair:
                out[tenant.label].setdefault(tool, []).append(tenant.timed(tool, {}))
    result = {
        label: {tool: round(statistics.median(v) * 1000, 1) for tool, v in tools.items()}
        for label, tools in out.items()
    }
    print(json.dumps({"small user work, median ms": result}), flush=True)
    return result


def disk_per_memory(dsn: str) -> dict[str, Any]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT count(*) FROM memories").fetchone()[0]  # type: ignore[index]
        total, heap = conn.execute(
            "SELECT pg_total_relation_size('memories'), pg_table_size('memories')"
        ).fetchone()  # type: ignore[misc]
        indexes = conn.execute(
            "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid)"
            " FROM pg_index WHERE indrelid = 'memories'::regclass ORDER BY 2 DESC"
        ).fetchall()
        database = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]  # type: ignore[index]
    return {
        "rows": rows,
        "bytes_per_memory": {
            "memories_total": round(total / rows),
            "heap_and_toast": round(heap / rows),
            **{name: round(size / rows) for name, size in indexes},
        },
        "database_gb": round(database / 2**30, 2),
    }


def build_own_indexes(dsn: str) -> dict[str, Any]:
    """What each server's first pass would do at start-up, done before the servers start so
    that no build runs while recall is measured (``memory.own_indexes``)."""

    async def run() -> dict[str, Any]:
        async with make_pool(dsn, max_size=1, name="bench-own-indexes") as pool:
            started = time.perf_counter()
            done = await keep_own_indexes(pool)
            return {"built": done.built, "seconds": round(time.perf_counter() - started, 1)}

    return asyncio.run(run())


def _servers(workdir: Path, dsns: dict[str, str]) -> Iterator[tuple[str, Server]]:
    for database, dsn in dsns.items():
        (workdir / database).mkdir(parents=True, exist_ok=True)
        server = Server(workdir / database, database_url=dsn)
        server.start()
        yield database, server


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--small-users", type=int, default=1000)
    parser.add_argument("--small-rows", type=int, default=1000)
    parser.add_argument("--big-rows", type=int, default=100_000)
    parser.add_argument("--lone-rows", type=int, default=10_000)
    parser.add_argument("--base", type=int, default=4000, help="real embeddings to mix")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--scans", type=int, default=3)
    parser.add_argument("--workdir", default=".bench/tenants")
    parser.add_argument(
        "--citus", action="store_true", help="tenants on a coordinator and two workers"
    )
    args = parser.parse_args()
    with ExitStack() as stack:
        run(args, stack)


def run(args: argparse.Namespace, stack: ExitStack) -> None:
    """The whole benchmark; a Citus cluster, if asked for, is stopped by ``stack``."""
    workdir = Path(args.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "cpus": os.cpu_count(),
        "tenants_store": "citus, 2 workers" if args.citus else "one node",
    }

    embedder = LocalEmbedder.bundled()
    base_texts = list(corpus.facts(args.base, seed=31))
    base = embed_cached(embedder, base_texts, workdir / f"base-{args.base}.npy")
    texts = list(corpus.facts(max(args.big_rows, args.lone_rows, args.small_rows)))
    small = [f"tenant-{i:04d}" for i in range(args.small_users)]
    layouts = {
        "tenants": {**{n: args.small_rows for n in small}, "tenant-big": args.big_rows},
        "lone_small": {"lone": args.small_rows},
        "lone_10k": {"lone": args.lone_rows},
        "lone_big": {"lone": args.big_rows},
    }
    dsns = {db: start_embedded(workdir / "pg", database=db) for db in layouts if db != "tenants"}
    cluster = None
    if args.citus:
        cluster, dsns["tenants"] = stack.enter_context(tenants_on_citus(workdir, "tenants"))
    else:
        dsns["tenants"] = start_embedded(workdir / "pg", database="tenants")
    for database, layout in layouts.items():
        on_citus = cluster is not None and database == "tenants"
        seed(
            dsns[database],
            database,
            layout,
            base,
            texts,
            fresh=None if on_citus else recreate,
            index_build=CITUS_INDEX_BUILD if on_citus else ONE_NODE_INDEX_BUILD,
        )
    results["own_indexes"] = {db: build_own_indexes(dsn) for db, dsn in dsns.items()}
    print(json.dumps({"own indexes": results["own_indexes"]}), flush=True)

    questions = corpus.questions(args.queries)
    query_vectors = asyncio.run(embedder.embed(questions))
    servers = dict(_servers(workdir, dsns))
    try:
        measured = small[len(small) // 2]
        tenants = [
            Tenant("small tenant", servers["tenants"], dsns["tenants"], measured),
            Tenant("lone 10k", servers["lone_10k"], dsns["lone_10k"], "lone"),
            Tenant("big tenant", servers["tenants"], dsns["tenants"], "tenant-big"),
            Tenant("lone big", servers["lone_big"], dsns["lone_big"], "lone"),
            Tenant("lone small", servers["lone_small"], dsns["lone_small"], "lone"),
        ]
        recall = measure_recall(tenants, questions, query_vectors, args.rounds)
        results["recall"] = recall
        small_p50 = recall["small tenant"]["http"]["p50"]
        big_p50 = recall["big tenant"]["http"]["p50"]
        results["ratios"] = {
            "small_p50_over_lone_10k": round(small_p50 / recall["lone 10k"]["http"]["p50"], 2),
            "small_p50_over_lone_small": round(small_p50 / recall["lone small"]["http"]["p50"], 2),
            "big_p50_over_lone_big": round(big_p50 / recall["lone big"]["http"]["p50"], 2),
        }
        print(json.dumps({"ratios": results["ratios"]}), flush=True)
        work = measure_small_user_work([tenants[0], tenants[4]], args.batches, args.scans)
        results["small_user_work_ms"] = work
        results["small_user_work_ratios"] = {
            tool: round(work["small tenant"][tool] / work["lone small"][tool], 2)
            for tool in work["small tenant"]
        }
        rss, hwm = servers["tenants"].rss_mb()
        results["tenants_serve_rss_mb"] = {"now": round(rss, 1), "peak": round(hwm, 1)}
        results["disk"] = (
            disk_per_memory(dsns["tenants"])
            if cluster is None
            else disk_per_memory_on_citus(cluster, dsns["tenants"])
        )
    finally:
        for server in servers.values():
            server.stop()
    print(json.dumps(results, indent=2))
    (workdir / "results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
