"""Recall latency with one setting changed, on an existing store, servers alternated.

    python -m scripts.bench.recall_ab --workdir /tmp/core-on --setting RECALL_GRAPH_HOP=false
        [--user bench] [--queries 300] [--limit 8] [--rounds 3]

Starts ``ownsona serve`` on ``WORKDIR/data`` (a store ``scripts.bench.core``
left, or any other) as configured, then with ``--setting`` added to its
environment, and again in the other order, ``--rounds`` times; each time it
asks ``--queries`` of the core benchmark's questions (``scripts.bench.corpus``)
with ``recall`` (``explain`` on, ``limit`` 8 like the core benchmark) after 30
unmeasured ones, and prints the p50 and p90 over HTTP and how many matches
each hop brought. Last, the ratio of the medians of the p50s (changed / as
configured). The store is not modified.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from .corpus import questions
from .mcp_client import McpClient
from .recall_quality import Server


def measure(
    workdir: Path, user: str, asked: list[str], limit: int
) -> tuple[float, float, dict[str, int]]:
    """One server: (p50 ms, p90 ms, matches per hop) over ``asked``."""
    server = Server(workdir, "recall-ab")
    try:
        client = McpClient(server.url, server._cli("token", "--user", user, "--ttl", "3600"))
        for q in asked[:30]:
            client.call("recall", {"query": q, "limit": limit})
        seconds: list[float] = []
        hops: collections.Counter[str] = collections.Counter()
        for q in asked:
            started = time.perf_counter()
            out = client.call("recall", {"query": q, "limit": limit, "explain": True})
            seconds.append(time.perf_counter() - started)
            hops.update(m["explain"].get("hop", "?") for m in out["matches"])
        client.close()
    finally:
        server.stop()
    seconds.sort()
    return (
        1000 * statistics.median(seconds),
        1000 * seconds[int(0.9 * (len(seconds) - 1))],
        dict(hops),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, required=True, help="holds the store in data/")
    parser.add_argument("--setting", required=True, help="NAME=VALUE added to the environment")
    parser.add_argument("--user", default="bench")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--limit", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    name, _, value = args.setting.partition("=")
    if not name or not (args.workdir / "data").is_dir():
        raise SystemExit("--setting NAME=VALUE and a --workdir holding data/ are needed")
    asked = questions(args.queries)
    p50s: dict[str, list[float]] = {"as configured": [], args.setting: []}
    for r in range(args.rounds):
        order = list(p50s) if r % 2 == 0 else list(reversed(p50s))
        for label in order:
            if label == args.setting:
                os.environ[name] = value
            else:
                os.environ.pop(name, None)
            p50, p90, hops = measure(args.workdir, args.user, asked, args.limit)
            p50s[label].append(p50)
            load = Path("/proc/loadavg").read_text().split()[0]
            print(f"round {r} {label}: p50 {p50:.2f} ms, p90 {p90:.2f} ms, {hops}, load {load}")
    os.environ.pop(name, None)
    ratio = statistics.median(p50s[args.setting]) / statistics.median(p50s["as configured"])
    print({k: [round(x, 2) for x in v] for k, v in p50s.items()})
    print(f"ratio of median p50s ({args.setting} / as configured): {ratio:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
