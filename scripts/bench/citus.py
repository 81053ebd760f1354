"""Citus against one node, in the same run, on the same data (issue 32).

    python -m scripts.bench.citus [--memories 2000] [--queries 200] [--writes 50]
        [--batches 5] [--batch-size 100] [--workdir .bench/citus]

Two stores side by side: one embedded PostgreSQL (the single node) and a Citus
cluster (a coordinator and two workers on loopback, ``scripts.cluster.citus_nodes``,
from the cached build of the vendored Citus). Both are migrated by ``ownsona
migrate``'s code and seeded through ``remember_batch`` with the same texts for one
user (two more users on Citus, so the user's shard has neighbours). Then, in
alternating rounds so a drifting machine hits both alike, through the use cases
in-process (the database's share is what differs; no HTTP):

- ``recall`` p50 and p99 (``--queries`` questions);
- ``remember`` p50 (``--writes`` single texts);
- ``remember_batch`` throughput (``--batches`` of ``--batch-size`` texts), texts/s.

Prints one JSON object: the figures per store and the Citus / one-node ratios
(issue 32's targets: recall and remember p50 at most 1.3x).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

from config.settings import Settings
from memory.calls import CallMeta
from memory.commands import Command
from memory.commands.reading import Recall
from memory.commands.remember import Remember, RememberBatch
from memory.deps import Deps
from memory.handlers import dispatch
from memory.providers.embedders import LocalEmbedder
from scripts.bench.corpus import facts, questions
from scripts.cluster.citus_build import ensure_built
from scripts.cluster.citus_nodes import CitusCluster
from storage.embedded import start_embedded, stop_embedded
from storage.migrate import migrate
from storage.pool import make_pool

DIMENSIONS = 384
#: The command class of each tool timed (each parses its tool's JSON arguments).
_COMMANDS: dict[str, type[Command]] = {
    "recall": Recall,
    "remember": Remember,
    "remember_batch": RememberBatch,
}


async def _call(deps: Deps, user: int, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    command = _COMMANDS[tool].parse(args, deps.settings)
    return await dispatch(deps, CallMeta(user), command)


def _user(dsn: str, name: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO users (username, password_hash) VALUES (%s, '!') RETURNING id", (name,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Store:
    def __init__(self, name: str, dsn: str, embedder: Any) -> None:
        self.name, self.dsn, self.embedder = name, dsn, embedder
        self.recall_ms: list[float] = []
        self.remember_ms: list[float] = []
        self.batch_rates: list[float] = []

    async def open(self) -> None:
        await migrate(self.dsn, dimensions=DIMENSIONS)
        self.pool = make_pool(self.dsn, min_size=1, max_size=4, name=f"bench-{self.name}")
        await self.pool.open(wait=True)
        self.deps = Deps(
            settings=Settings(public_url="http://127.0.0.1:8000"),
            pool=self.pool,
            embedder=self.embedder,
        )

    async def seed(self, texts: list[str], batch_size: int) -> None:
        self.user = _user(self.dsn, f"bench-{self.name}")
        for others in range(2):  # neighbours on the user's shard (on Citus)
            _user(self.dsn, f"other-{self.name}-{others}")
        for start in range(0, len(texts), batch_size):
            items = [{"text": t} for t in texts[start : start + batch_size]]
            await _call(self.deps, self.user, "remember_batch", {"items": items})

    async def recall(self, query: str) -> None:
        began = time.perf_counter()
        await _call(self.deps, self.user, "recall", {"query": query})
        self.recall_ms.append((time.perf_counter() - began) * 1000)

    async def remember(self, text: str) -> None:
        began = time.perf_counter()
        await _call(self.deps, self.user, "remember", {"text": text})
        self.remember_ms.append((time.perf_counter() - began) * 1000)

    async def batch(self, texts: list[str]) -> None:
        began = time.perf_counter()
        await _call(self.deps, self.user, "remember_batch", {"items": [{"text": t} for t in texts]})
        self.batch_rates.append(len(texts) / (time.perf_counter() - began))

    def figures(self) -> dict[str, float]:
        return {
            "recall_p50_ms": round(statistics.median(self.recall_ms), 2),
            "recall_p99_ms": round(pct(self.recall_ms, 0.99), 2),
            "remember_p50_ms": round(statistics.median(self.remember_ms), 2),
            "remember_batch_texts_per_s": round(statistics.median(self.batch_rates), 1),
        }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(args.workdir)
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    workdir.chmod(0o755)
    (workdir / "citus").mkdir()
    (workdir / "citus").chmod(0o755)
    embedder = LocalEmbedder.bundled()
    total = args.memories + args.writes * 2 + args.batches * args.batch_size * 2
    texts = list(facts(total))
    seed_texts, rest = texts[: args.memories], texts[args.memories :]
    asked = questions(args.queries)
    cluster = CitusCluster(workdir / "citus", ensure_built())
    single_dir = workdir / "single"
    try:
        cluster.start()
        single = Store("single", start_embedded(single_dir, database="bench"), embedder)
        citus = Store("citus", cluster.dsn(), embedder)
        stores = [single, citus]
        for store in stores:
            await store.open()
            await store.seed(seed_texts, args.batch_size)
        for n, query in enumerate(asked):  # alternating, each store first in turn
            for store in stores if n % 2 == 0 else stores[::-1]:
                await store.recall(query)
        for n in range(args.writes):
            for i, store in enumerate(stores):
                await store.remember(rest[2 * n + i])
        offset = 2 * args.writes
        for n in range(args.batches):
            for i, store in enumerate(stores):
                start = offset + (2 * n + i) * args.batch_size
                await store.batch(rest[start : start + args.batch_size])
        one, distributed = single.figures(), citus.figures()
        for store in stores:
            await store.pool.close()
    finally:
        cluster.stop()
        stop_embedded(single_dir)
    ratios = {
        key: round(distributed[key] / one[key], 3) for key in one if one[key] and key.endswith("ms")
    }
    ratios["remember_batch_throughput"] = round(
        distributed["remember_batch_texts_per_s"] / one["remember_batch_texts_per_s"], 3
    )
    return {
        "memories": args.memories,
        "queries": args.queries,
        "single_node": one,
        "citus": distributed,
        "citus_over_single_node": ratios,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--writes", type=int, default=50)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--workdir", default=".bench/citus")
    print(json.dumps(asyncio.run(run(parser.parse_args(argv))), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
