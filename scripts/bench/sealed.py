"""Sealed at rest against plain, in the same run: recall, remember and text_search p50.

    python -m scripts.bench.sealed [--size 10000] [--queries 200] [--writes 100] [--workdir .bench/sealed]

Two ``ownsona serve`` processes on the embedded default, one with
``OWNSONA_SEAL_MEMORIES=true`` (its generated master key in its data folder),
one without, each seeded with the same synthetic facts through ``remember_batch``
(sealed rows can only be written by a server holding the key, so no ``COPY``
here). Then, alternating between them round by round so that the machine's load
falls on both alike: ``recall`` of the same questions, ``remember`` of new facts,
``text_search`` of fragments. Prints p50 and p99 of each, and the ratios sealed /
plain that issue 34's targets name (recall and remember ≤ 1.15; text_search p50 ≤
150 ms for a user of 10,000 memories, sealed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from . import corpus
from .core import Server, summary

#: Rounds the measured calls are split in, alternating servers.
ROUNDS = 4
#: Items per seeding call (MAX_BATCH_SIZE's default).
SEED_BATCH = 200


def _server(workdir: Path, *, sealed: bool) -> Server:
    saved = os.environ.get("OWNSONA_SEAL_MEMORIES")
    os.environ["OWNSONA_SEAL_MEMORIES"] = "true" if sealed else "false"
    try:
        return Server(workdir)
    finally:
        if saved is None:
            del os.environ["OWNSONA_SEAL_MEMORIES"]
        else:
            os.environ["OWNSONA_SEAL_MEMORIES"] = saved


def _seed(server: Server, texts: list[str]) -> None:
    for start in range(0, len(texts), SEED_BATCH):
        items = [{"text": t} for t in texts[start : start + SEED_BATCH]]
        server.call("remember_batch", {"items": items, "dedup_policy": "insert"})


def _timed(server: Server, tool: str, arguments: dict[str, Any]) -> float:
    started = time.perf_counter()
    server.call(tool, arguments)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--writes", type=int, default=100)
    parser.add_argument("--workdir", default=".bench/sealed")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()

    root = Path(args.workdir)
    shutil.rmtree(root, ignore_errors=True)
    servers = {}
    for name, sealed in (("plain", False), ("sealed", True)):
        (root / name).mkdir(parents=True)
        servers[name] = _server(root / name, sealed=sealed)
    facts = list(corpus.facts(args.size + args.writes))
    seeded, new = facts[: args.size], facts[args.size :]
    questions = corpus.questions(args.queries)
    fragments = [q.split()[-1][:6] for q in questions]
    times: dict[str, dict[str, list[float]]] = {n: {} for n in servers}
    try:
        for name, server in servers.items():
            server.start()
            started = time.perf_counter()
            _seed(server, seeded)
            print(f"{name}: seeded {len(seeded)} in {time.perf_counter() - started:.1f}s")
            for q in questions[:10]:  # warm up
                server.call("recall", {"query": q})
        for r in range(ROUNDS):
            for name, server in servers.items():
                t = times[name]
                for q in questions[r::ROUNDS]:
                    t.setdefault("recall", []).append(_timed(server, "recall", {"query": q}))
                for text in new[r::ROUNDS]:
                    t.setdefault("remember", []).append(_timed(server, "remember", {"text": text}))
                for f in fragments[r::ROUNDS]:
                    t.setdefault("text_search", []).append(
                        _timed(server, "text_search", {"text": f})
                    )
    finally:
        for server in servers.values():
            server.stop()
    figures = {n: {tool: summary(v) for tool, v in t.items()} for n, t in times.items()}
    print(f"{'tool':<12} {'plain p50 ms':>12} {'sealed p50 ms':>13} {'ratio':>6}")
    for tool in ("recall", "remember", "text_search"):
        plain_p50, sealed_p50 = figures["plain"][tool]["p50"], figures["sealed"][tool]["p50"]
        ratio = sealed_p50 / plain_p50
        print(f"{tool:<12} {plain_p50:>12.1f} {sealed_p50:>13.1f} {ratio:>6.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
