"""Recall while Redis is silent, replicas configured, against the same with Redis up.

    python -m scripts.bench.redis_silent [--memories 2000] [--queries 100] [--rounds 4]
        [--workdir DIR] [--keep] [--json]

Issue 33's target: "reads while Redis is silent, replicas configured: p99 <= 1.5x the p99
with Redis up". A PostgreSQL primary with one synchronous streaming standby
(``scripts/cluster/postgres_nodes.py``), a Redis of its own (``scripts/cluster/redis_nodes``)
and one ``ownsona serve`` process with ``DATABASE_REPLICA_URLS`` = the standby and
``REDIS_URL`` = that Redis (it keeps the users' write positions there; reads ask it
first). A seeding process (its own in-process worker, no Redis) stores ``--memories``
facts and stops first. The same ``--queries`` recalls then run in alternating rounds:
Redis up, then Redis silent (SIGSTOP: the kernel still accepts connections and nothing
answers, as a paused machine; ``scripts/cluster/freeze.py``), ``--rounds`` times, silent
first every other round, so load changes on a shared machine hit both; after each thaw
the run waits out the positions' skip time before Redis counts as up again. Printed (JSON with
``--json``): recall p50/p90/p99 (ms, client side, over HTTP) in each mode, and the
silent/up ratios; ``target_met`` is the p99 ratio against :data:`TARGET`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bootstrap.write_positions import POSITIONS_SKIP_S
from scripts.cluster.freeze import freeze, thaw
from scripts.cluster.postgres_nodes import PgPair
from scripts.cluster.redis_nodes import RedisNode, redis_server_available
from scripts.processes import free_port

from . import corpus
from .mcp_client import McpClient
from .replica_recall import Web, seed, stats, timed_recalls, wait_replayed

#: Issue 33: recall p99 with Redis silent at most this times the p99 with Redis up.
TARGET = 1.5
#: Recalls before measuring (embedder, pools, caches, the Redis connections).
WARM_UP = 20


def measure(
    web: Web, client: McpClient, redis_pid: int, questions: list[str], rounds: int
) -> tuple[dict[str, list[float]], dict[str, dict[str, float]]]:
    """Every question once per round, Redis up or silent, alternating which comes first.

    Returns the times by mode, and by mode where the reads went (``ownsona_replica_reads``:
    the replica's host:port/db, or ``primary``). After Redis thaws, an "up" phase starts
    only once the skipped write positions are asked again (POSITIONS_SKIP_S), so it
    measures Redis up, not the tail of the outage.
    """
    times: dict[str, list[float]] = {"up": [], "silent": []}
    reads: dict[str, dict[str, float]] = {"up": {}, "silent": {}}
    for r in range(rounds):
        for mode in ("up", "silent") if r % 2 == 0 else ("silent", "up"):
            before = web.replica_reads()
            if mode == "silent":
                freeze([redis_pid])
            try:
                times[mode] += timed_recalls(client, questions)
            finally:
                thaw([redis_pid])
            after = web.replica_reads()
            for label, count in after.items():
                reads[mode][label] = reads[mode].get(label, 0) + count - before.get(label, 0)
            if mode == "silent":
                time.sleep(POSITIONS_SKIP_S + 0.5)
    return times, reads


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    pair = PgPair(root / "pg", "sync")
    redis_node = RedisNode("redis", root)
    webs: list[Web] = []
    try:
        (root / "pg").mkdir()
        os.chmod(root / "pg", 0o755)  # the PostgreSQL user reaches its directories
        pair.start()
        redis_node.start()
        assert redis_node.process is not None
        port = free_port()
        drop = ("DATABASE_", "REDIS_", "METRICS_", "PORT", "QUEUE_")  # none of the caller's own
        base = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        base.update(
            DATABASE_URL=pair.primary.dsn(),
            OWNSONA_PUBLIC_URL=f"http://127.0.0.1:{port}",
            OWNSONA_LOGIN_USERNAME="bench",
            OWNSONA_LOGIN_PASSWORD="bench-password-not-secret",
            METRICS_ENABLED="true",
            LOG_FORMAT="text",
        )
        seeder = Web("seed", root, base, free_port())
        webs = [seeder]
        seeder.start()
        token = seeder.token("bench")
        seeded_s = seed(McpClient(seeder.url, token), args.memories)
        seeder.stop()
        web = Web(
            "web",
            root,
            {
                **base,
                "DATABASE_REPLICA_URLS": pair.standby.dsn(),
                "REDIS_URL": f"redis://127.0.0.1:{redis_node.port}/0",
            },
            port,
        )
        webs.append(web)
        web.start()
        client = McpClient(web.url, token)
        pair.primary.sql("VACUUM ANALYZE memories")
        replay_s = wait_replayed(pair)
        deadline = time.monotonic() + 30
        while not all(r["ok"] for r in web.readyz().get("replicas", [{}])):
            if time.monotonic() > deadline:
                raise SystemExit(f"the replica is not ok: {web.readyz()}")
            time.sleep(0.5)
        for q in corpus.questions(WARM_UP, seed=57):
            client.call("recall", {"query": q, "limit": 8})
        questions = corpus.questions(args.queries, seed=31)
        started = time.perf_counter()
        times, reads = measure(web, client, redis_node.process.pid, questions, args.rounds)
        measure_s = time.perf_counter() - started
        client.close()
        up, silent = stats(times["up"]), stats(times["silent"])
        return {
            "memories": args.memories,
            "queries": args.queries,
            "rounds": args.rounds,
            "seed_s": round(seeded_s, 1),
            "replay_wait_s": round(replay_s, 2),
            "measure_s": round(measure_s, 1),
            "redis_up_ms": up,
            "redis_silent_ms": silent,
            **{f"ratio_{p}": round(silent[p] / up[p], 3) for p in ("p50", "p90", "p99")},
            "target": TARGET,
            "target_met": silent["p99"] <= TARGET * up["p99"],
            # Where the reads went (replica host:port/db, or primary): with Redis silent
            # the write positions are skipped and the reads go to the primary.
            "reads": reads,
        }
    finally:
        if redis_node.process is not None:
            thaw([redis_node.process.pid])  # a stopped process ignores SIGTERM until resumed
        for w in reversed(webs):
            w.stop()
        redis_node.stop()
        pair.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench.redis_silent")
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--workdir", type=Path, help="parent of the temporary directory")
    parser.add_argument("--keep", action="store_true", help="keep the logs and data")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.memories < 1 or args.queries < 1 or args.rounds < 1:
        raise SystemExit("--memories, --queries and --rounds must be at least 1")
    if not redis_server_available():
        raise SystemExit("needs redis-server on PATH")
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="ownsona-redis-silent-", dir=args.workdir))
    os.chmod(root, 0o755)
    started = time.monotonic()
    try:
        result = run(args, root)
    finally:
        if args.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    result["total_s"] = round(time.monotonic() - started, 1)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    r = result
    print(
        "\n".join(
            [
                f"{r['memories']} memories, {r['queries']} queries x {r['rounds']} rounds",
                *(
                    f"  {n:16} p50 {r[n]['p50']:8.2f}  p90 {r[n]['p90']:8.2f}  "
                    f"p99 {r[n]['p99']:8.2f}  n {r[n]['n']}"
                    for n in ("redis_up_ms", "redis_silent_ms")
                ),
                f"  silent/up p99 {r['ratio_p99']} (target <= {TARGET}: "
                f"{'met' if r['target_met'] else 'NOT met'}); p50 {r['ratio_p50']}, "
                f"p90 {r['ratio_p90']}",
                f"  reads: {r['reads']}; total {r['total_s']} s",
            ]
        )
    )


if __name__ == "__main__":
    main()
