"""Recall from a read replica against the same recall from the primary (issue 29's target).

    python -m scripts.bench.replica_recall [--memories 2000] [--queries 200] [--rounds 3]
        [--block 20] [--workdir DIR] [--keep] [--json] [--control]

Issue 29: "Recall p50 served from a replica no more than 1.1 times the same recall from
the primary, same run, same machine." A PostgreSQL primary with one synchronous streaming
standby (``scripts/cluster/postgres_nodes.py``) and two real ``ownsona serve`` processes
on it, each with its in-process worker: A with ``DATABASE_URL`` = the primary and no
replica (every read on the primary); B with the same ``DATABASE_URL`` and
``DATABASE_REPLICA_URLS`` = the standby. A third process seeds one account with
``--memories`` synthetic facts through ``remember_batch`` and stops before A and B start;
the primary is vacuumed and analysed and the standby's replay awaited. After a warm-up,
the same ``--queries`` recalls go through A and B in blocks of ``--block`` (A then B, then
B then A, ...), ``--rounds`` times, so load changes on a shared machine hit both. B's ``/readyz`` must show the replica ok and
B's ``/metrics`` must count every one of its recalls as a replica read, none on the
primary, or the run fails. ``--control``: B gets no replica either (A against A), the
method's noise floor on this machine. Printed: recall p50/p90/p99 (ms, client side, over
HTTP) for A and B, the B/A ratios, the medians of per-round and per-block B/A p50 ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from scripts.cluster.postgres_nodes import PgPair
from scripts.processes import free_port, stop_process, wait_until_healthy

from . import corpus
from .core import pct
from .mcp_client import McpClient

#: Recalls through each process before measuring (embedder, pools, caches).
WARM_UP = 30
#: Issue 29: the replica's recall p50 at most this times the primary's.
TARGET = 1.1
#: Items per remember_batch call while seeding.
SEED_BATCH = 100
_REPLICA_READS = re.compile(r'^ownsona_replica_reads\{replica="([^"]+)"\}\s+(\S+)', re.M)


class Web:
    """One ``ownsona serve`` process on the pair's database."""

    def __init__(self, name: str, root: Path, env: dict[str, str], port: int) -> None:
        self.name = name
        self.root = root
        self.url = f"http://127.0.0.1:{port}"
        self.env = {**env, "PORT": str(port), "OWNSONA_DATA_DIR": str(root / name)}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        (self.root / self.name).mkdir(exist_ok=True)
        with open(self.root / f"{self.name}.log", "a") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "scripts.cli", "serve"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        problem = wait_until_healthy(self.url, self.proc, timeout_s=180)
        if problem is not None:
            tail = (self.root / f"{self.name}.log").read_text(errors="replace")[-3000:]
            raise SystemExit(f"{self.name} {problem}; its log ends:\n{tail}")

    def token(self, user: str) -> str:
        argv = [sys.executable, "-m", "scripts.cli", "token", "--user", user, "--ttl", "86400"]
        out = subprocess.run(argv, env=self.env, capture_output=True, text=True, check=True)
        return out.stdout.strip().splitlines()[-1]

    def readyz(self) -> Any:
        return httpx.get(f"{self.url}/readyz", timeout=30).json()

    def replica_reads(self) -> dict[str, float]:
        """``ownsona_replica_reads`` by label (a replica's host:port/db, or ``primary``)."""
        reply = httpx.get(f"{self.url}/metrics", timeout=30)
        reply.raise_for_status()
        return {label: float(value) for label, value in _REPLICA_READS.findall(reply.text)}

    def stop(self) -> None:
        stop_process(self.proc)


def wait_replayed(pair: PgPair, timeout_s: float = 120) -> float:
    """Until the standby has replayed the primary's WAL as of now; seconds waited."""
    target = pair.primary.sql("SELECT pg_current_wal_lsn()")
    started = time.monotonic()
    query = f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn"
    while pair.standby.sql(query) != "t":
        if time.monotonic() - started > timeout_s:
            raise SystemExit(f"the standby did not replay up to {target} in {timeout_s:.0f} s")
        time.sleep(0.1)
    return time.monotonic() - started


def seed(client: McpClient, memories: int) -> float:
    """``memories`` facts through remember_batch; seconds taken."""
    facts = list(corpus.facts(memories, seed=29))
    started = time.perf_counter()
    for at in range(0, memories, SEED_BATCH):
        items = [{"text": t} for t in facts[at : at + SEED_BATCH]]
        client.call("remember_batch", {"items": items, "dedup_policy": "insert"})
    return time.perf_counter() - started


def timed_recalls(client: McpClient, questions: list[str]) -> list[float]:
    times = []
    for q in questions:
        t = time.perf_counter()
        client.call("recall", {"query": q, "limit": 8})
        times.append(time.perf_counter() - t)
    return times


def stats(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {f"p{q}": round(pct(ms, q), 2) for q in (50, 90, 99)} | {"n": len(ms)}


def measure(
    clients: dict[str, McpClient], questions: list[str], rounds: int, block: int
) -> tuple[dict[str, list[float]], list[float], list[float]]:
    """Every question through A and B, block by block, alternating who goes first.

    Returns the times by process, and the B/A ratio of the p50s of each round and of
    each block (the same questions through both, moments apart).
    """
    times: dict[str, list[float]] = {"A": [], "B": []}
    round_ratios, block_ratios = [], []
    for r in range(rounds):
        this_round: dict[str, list[float]] = {"A": [], "B": []}
        for n, at in enumerate(range(0, len(questions), block)):
            part = questions[at : at + block]
            got = {}
            for name in ("A", "B") if (r + n) % 2 == 0 else ("B", "A"):
                got[name] = timed_recalls(clients[name], part)
                this_round[name] += got[name]
            block_ratios.append(statistics.median(got["B"]) / statistics.median(got["A"]))
        for name in times:
            times[name] += this_round[name]
        round_ratios.append(statistics.median(this_round["B"]) / statistics.median(this_round["A"]))
    return times, round_ratios, block_ratios


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    pair = PgPair(root / "pg", "sync")
    webs: list[Web] = []
    try:
        (root / "pg").mkdir()
        os.chmod(root / "pg", 0o755)  # the PostgreSQL user reaches its directories
        pair.start()
        ports = [free_port(), free_port()]
        drop = ("DATABASE_", "REDIS_", "METRICS_", "PORT")  # none of the caller's own
        base = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        base.update(
            DATABASE_URL=pair.primary.dsn(),
            # One audience for both: a token minted once is valid at either process.
            OWNSONA_PUBLIC_URL=f"http://127.0.0.1:{ports[0]}",
            OWNSONA_LOGIN_USERNAME="bench",
            OWNSONA_LOGIN_PASSWORD="bench-password-not-secret",
            METRICS_ENABLED="true",
            LOG_FORMAT="text",
        )
        # A and B start alike: neither wrote the store (a control run with A seeding: A 10% slower).
        seeder = Web("seed", root, base, free_port())
        webs = [seeder]
        seeder.start()
        token = seeder.token("bench")
        seeded_s = seed(McpClient(seeder.url, token), args.memories)
        seeder.stop()
        a = Web("A", root, base, ports[0])
        replica_env = {} if args.control else {"DATABASE_REPLICA_URLS": pair.standby.dsn()}
        b = Web("B", root, {**base, **replica_env}, ports[1])
        webs += [a, b]
        a.start()
        b.start()
        clients = {"A": McpClient(a.url, token), "B": McpClient(b.url, token)}
        pair.primary.sql("VACUUM ANALYZE memories")
        replay_s = wait_replayed(pair)
        rows = pair.primary.sql("SELECT count(*) FROM memories")
        if pair.standby.sql("SELECT count(*) FROM memories") != rows:
            raise SystemExit("the standby does not hold the primary's memories after replay")
        deadline = time.monotonic() + 30
        while not args.control and not all(r["ok"] for r in b.readyz().get("replicas", [{}])):
            if time.monotonic() > deadline:
                raise SystemExit(f"B's replica is not ok: {b.readyz()}")
            time.sleep(0.5)
        if "replicas" in a.readyz() or a.replica_reads():
            raise SystemExit("A has a replica configured: it must read from the primary only")
        for q in corpus.questions(WARM_UP, seed=57):
            clients["A"].call("recall", {"query": q, "limit": 8})
            clients["B"].call("recall", {"query": q, "limit": 8})
        before = b.replica_reads()
        questions = corpus.questions(args.queries, seed=31)
        started = time.perf_counter()
        times, round_ratios, block_ratios = measure(clients, questions, args.rounds, args.block)
        measure_s = time.perf_counter() - started
        after = b.replica_reads()
        replica = pair.standby.dsn().split("@", 1)[1]
        reads = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        if not args.control and (reads.get(replica, 0) < len(times["B"]) or reads.get("primary")):
            raise SystemExit(
                f"B's reads did not all go to the replica {replica}: {reads} "
                f"for {len(times['B'])} recalls"
            )
        for client in clients.values():
            client.close()
        a_stats, b_stats = stats(times["A"]), stats(times["B"])
        return {
            "memories": int(rows),
            "control": args.control,
            **{k: getattr(args, k) for k in ("queries", "rounds", "block")},
            "seed_s": round(seeded_s, 1),
            "replay_wait_s": round(replay_s, 2),
            "measure_s": round(measure_s, 1),
            "A_primary_ms": a_stats,
            "B_replica_ms": b_stats,
            **{f"ratio_{p}": round(b_stats[p] / a_stats[p], 3) for p in ("p50", "p90", "p99")},
            "target_met": b_stats["p50"] <= TARGET * a_stats["p50"],
            "round_ratios_p50": [round(r, 3) for r in round_ratios],
            "median_round_ratio_p50": round(statistics.median(round_ratios), 3),
            "median_block_ratio_p50": round(statistics.median(block_ratios), 3),
            "B_reads": reads,
            "B_readyz_replicas": b.readyz().get("replicas"),
        }
    finally:
        for web in reversed(webs):
            web.stop()
        pair.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench.replica_recall")
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--block", type=int, default=20, help="recalls per turn of A or B")
    parser.add_argument("--workdir", type=Path, help="parent of the temporary directory")
    parser.add_argument("--keep", action="store_true", help="keep the logs and data")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--control", action="store_true", help="B without the replica: the method's noise floor"
    )
    args = parser.parse_args()
    if args.memories < 1 or args.queries < 1 or args.rounds < 1 or args.block < 1:
        raise SystemExit("--memories, --queries, --rounds and --block must be at least 1")
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="ownsona-replica-recall-", dir=args.workdir))
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
    control = " (CONTROL: B reads the primary too)" if args.control else ""
    lines = [
        f"{r['memories']} memories, {args.queries} queries x {args.rounds} rounds, blocks of "
        f"{args.block}{control}; seeded in {r['seed_s']} s, replay wait {r['replay_wait_s']} s",
        *(
            f"  {n:13} p50 {r[n]['p50']:7.2f}  p90 {r[n]['p90']:7.2f}  p99 {r[n]['p99']:7.2f}  "
            f"n {r[n]['n']}"
            for n in ("A_primary_ms", "B_replica_ms")
        ),
        f"  B/A p50 {r['ratio_p50']} (target <= {TARGET}: {'met' if r['target_met'] else 'NOT met'})"
        f"; p90 {r['ratio_p90']}, p99 {r['ratio_p99']}",
        f"  per-round B/A p50 {r['round_ratios_p50']}, median {r['median_round_ratio_p50']}; "
        f"median per-block B/A {r['median_block_ratio_p50']}",
        f"  B's reads during the measure: {r['B_reads']}; total {r['total_s']} s",
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
