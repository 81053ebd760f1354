"""Contradiction benchmark: find_conflicts on 50 contradicting pairs among 5,000 other facts.

    python -m scripts.bench.conflicts [--pairs 50] [--others 5000] [--seed 7]
        [--workdir .bench/conflicts] [--json out.json]

Generates one person's store (:func:`store`): ``--pairs`` pairs of
contradicting personal facts (one fact, then a later one giving the same
single-valued thing another value: where the user lives, their car, partner,
employer, school, birthday, a favourite; or the same of a friend or relative),
worded differently from pair to pair and within a pair ("The user's car is
...", "I drive a ...", "User lives in ...", "I moved to ...", "My partner is
..."), both facts under the same topic tag. Around them ``--others``
realistic personal facts that contradict nothing: facts about a few hundred
other people (each with at most one home, employer, birthday, car, favourite
of a kind), facts of the user's that several values may hold at once (two
allergies, things owned, languages, likes), and everyday notes. The user's
facts are tagged by topic; facts about another person by that person
(``--tags person``, the default) or by topic (``--tags topic``); both facts
of a pair share their tag.

Then, through the real tools of a real server (``ownsona serve`` on the
embedded default, the local model, the in-process worker with the rules
extractor): stores everything with ``remember_batch`` over ``/mcp`` in
shuffled order, calls ``find_conflicts`` at its default threshold with
``max_groups`` 500 right away (some extraction jobs still queued: those
memories are read by the scan itself) and again once the worker is idle,
and prints, for each call, the pairs surfaced (both facts in one group; target
>= 45 of 50), the false groups (a group holding no seeded pair; target <= 10),
the groups by reason and the call's wall time. Deterministic for a seed.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

from .conflict_store import Fact, store
from .core import Server
from .ingest_long import RssSampler, call, drained
from .runs import run_facts, work_directory


def score(groups: list[dict[str, Any]], pair_ids: list[tuple[int, int]]) -> dict[str, Any]:
    member = {i: n for n, g in enumerate(groups) for i in g["ids"]}
    surfaced = sum(1 for a, b in pair_ids if a in member and member.get(a) == member.get(b))
    holding = {member[a] for a, b in pair_ids if a in member and member[a] == member.get(b)}
    false = [g for n, g in enumerate(groups) if n not in holding]
    reasons: dict[str, int] = {}
    for g in groups:
        reasons[g.get("reason", "?")] = reasons.get(g.get("reason", "?"), 0) + 1
    return {
        "pairs_surfaced": surfaced,
        "pairs": len(pair_ids),
        "false_groups": len(false),
        "groups": len(groups),
        "groups_by_reason": reasons,
        "largest_group": max((len(g["ids"]) for g in groups), default=0),
        "false_group_examples": [[m["text"] for m in g["memories"][:3]] for g in false[:5]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=50)
    parser.add_argument("--others", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workdir", default=".bench/conflicts")
    parser.add_argument(
        "--tags",
        choices=("person", "topic"),
        default="person",
        help="tag facts about other people with the person (default) or with their topic",
    )
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args()
    workdir = work_directory(args.workdir, fresh=True)  # a fresh store each run

    pairs, others = store(args.pairs, args.others, args.seed, person_tags=args.tags == "person")
    rng = random.Random(args.seed + 1)
    # (fact, its pair's number, 0 first / 1 second), or (fact, None, None).
    items: list[tuple[Fact, int | None, int | None]] = [
        (f, n, side) for n, p in enumerate(pairs) for side, f in enumerate((p.first, p.second))
    ]
    items += [(f, None, None) for f in others]
    # Shuffled, but each pair's second fact after its first (a later statement).
    rng.shuffle(items)
    firsts = {n: k for k, (_f, n, side) in enumerate(items) if side == 0}
    for k, (_f, n, side) in enumerate(items):
        if side == 1 and firsts[n] > k:
            items[k], items[firsts[n]] = items[firsts[n]], items[k]
            firsts[n] = k

    server = Server(workdir)
    server.start()
    assert server.proc is not None
    results: dict[str, Any] = {
        **run_facts(),
        "pairs": len(pairs),
        "others": len(others),
        "seed": args.seed,
        "tags": args.tags,
    }
    try:
        ids: list[int] = []
        started = time.perf_counter()
        for b in range(0, len(items), 200):
            batch = items[b : b + 200]
            payload, _s = call(
                server,
                "remember_batch",
                {
                    "items": [{"text": f.text, "tags": list(f.tags)} for f, _n, _side in batch],
                    "dedup_policy": "insert",
                },
            )
            if not payload.get("ok") or payload["summary"]["failed"]:
                raise SystemExit(f"remember_batch failed: {payload}")
            ids += [r["memory_id"] for r in payload["results"]]
        results["ingest_s"] = round(time.perf_counter() - started, 1)
        where = {(n, side): ids[k] for k, (_f, n, side) in enumerate(items) if n is not None}
        pair_ids = [(where[(n, 0)], where[(n, 1)]) for n in range(len(pairs))]
        for label in ("right_after_ingest", "after_extraction"):
            if label == "after_extraction":
                with RssSampler(server.proc.pid) as sampler:
                    results["drain_s"] = round(drained(server, sampler, quiet_s=3, most_s=900), 1)
            times = []
            for _ in range(3):
                payload, seconds = call(server, "find_conflicts", {"max_groups": 500})
                times.append(seconds)
            if not payload.get("ok"):
                raise SystemExit(f"find_conflicts failed: {payload}")
            results[label] = {
                "threshold": payload["threshold"],
                "median_s": round(statistics.median(times), 2),
                **score(payload["groups"], pair_ids),
            }
            missed = [
                (pairs[n].first.text, pairs[n].second.text)
                for n, (a, b) in enumerate(pair_ids)
                if not any(a in g["ids"] and b in g["ids"] for g in payload["groups"])
            ]
            results[label]["missed_examples"] = missed[:5]
            print(json.dumps({label: results[label]}, indent=2), flush=True)
    finally:
        server.stop()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
