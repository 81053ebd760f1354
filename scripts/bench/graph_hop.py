"""Questions whose answer is one relation away: recall with and without the graph hop.

    python -m scripts.bench.graph_hop [--people 12] [--others 300] [--seed 11]
        [--workdir .bench/graph_hop] [--json out.json]

"Where does my manager live?" needs two memories: "My manager is Ana Silva."
(it looks like the question) and "Ana Silva lives in Porto." (it does not
name the manager, and hundreds of other "... lives in ..." facts look as much
like the question). The generator (:func:`store`, deterministic for a seed)
writes one person's store: ``--people`` people the user names by a role they
alone hold (manager, mentor, sister, ...: "My manager is Ana Silva." or "Ana
Silva is my manager."), each with six facts stated under their full name
(where they live, work, what they drive, their birthday, an allergy, their
dog, worded two ways each); ``--others`` other people with four to six facts
of the same kinds and no role of their own; and, for each role person and
kind of fact, the question "Where does my manager live?", "What car does my
sister drive?", ... whose evidence is the role fact and the fact asked about.

Then, through the real tools of a real server (``ownsona serve`` on the
embedded default, the local model, the in-process worker with the rules
extractor), twice on fresh stores: once as configured (the graph hop on) and
once with ``RECALL_GRAPH_HOP=false``. Each run stores everything with
``remember_batch``, waits until the worker has extracted every role person's
relations, and asks every question with ``recall`` (limit 10). Printed, for
both runs and for BM25 and cosine-only over the same facts: how often both
memories are in the top 10 (recall_all@10), the fact asked about in the top
10 (answer@10), the mean share of the evidence in the top 10 (R@10), and the
reciprocal rank of the fact asked about (answer MRR).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .conflict_store import date_phrase
from .conflict_words import ALLERGENS, CARS, CITIES, COLOURS, COMPANIES, FIRST, LAST, PETS
from .mcp_client import McpClient
from .recall_quality import BM25, Server, cosine_rankings

#: Roles one person alone holds, so "my manager" names them.
ROLES = (
    "manager",
    "mentor",
    "partner",
    "sister",
    "brother",
    "mother",
    "father",
    "aunt",
    "uncle",
    "grandmother",
    "godfather",
    "assistant",
    "landlord",
    "wife",
    "husband",
)
_JOBS = ("nurse", "chef", "teacher", "data analyst", "architect", "pilot", "translator", "welder")
KINDS = ("home", "work", "car", "birthday", "allergy", "dog")
LIMIT = 10


@dataclass(frozen=True)
class Question:
    text: str
    #: Indexes into the store's facts: the role fact, then the fact asked about.
    role_fact: int
    answer_fact: int
    kind: str


def _facts_about(rng: random.Random, name: str) -> dict[str, str]:
    """One fact of each kind about ``name``, each worded one of two ways."""
    city, company, car = rng.choice(CITIES), rng.choice(COMPANIES), rng.choice(CARS)
    allergen, pet = rng.choice(ALLERGENS), rng.choice(PETS)
    return {
        "home": rng.choice(
            [
                f"{name} lives in {city}.",
                f"{name} has lived in {city} since {rng.randint(1995, 2022)}.",
            ]
        ),
        "work": rng.choice(
            [f"{name} works at {company} as a {rng.choice(_JOBS)}.", f"{name} works at {company}."]
        ),
        "car": rng.choice(
            [f"{name} drives a {rng.choice(COLOURS)} {car}.", f"{name} drives a {car} to work."]
        ),
        "birthday": f"{name}'s birthday is {date_phrase(rng)}.",
        "allergy": rng.choice(
            [f"{name} is allergic to {allergen}.", f"{name} has a severe {allergen} allergy."]
        ),
        "dog": rng.choice([f"{name} has a dog named {pet}.", f"{name} has a dog called {pet}."]),
    }


def _question(kind: str, role: str) -> str:
    return {
        "home": f"Where does my {role} live?",
        "work": f"Where does my {role} work?",
        "car": f"What car does my {role} drive?",
        "birthday": f"When is my {role}'s birthday?",
        "allergy": f"What is my {role} allergic to?",
        "dog": f"What is the name of my {role}'s dog?",
    }[kind]


def store(people: int, others: int, seed: int) -> tuple[list[str], list[Question]]:
    """The facts (shuffled) and the questions about them, deterministic for ``seed``."""
    if people > len(ROLES):
        raise SystemExit(f"--people is at most {len(ROLES)}")
    rng = random.Random(seed)
    names = [f"{first} {last}" for first in FIRST for last in LAST]
    rng.shuffle(names)
    if people + others > len(names):
        raise SystemExit(f"--people + --others is at most {len(names)}")
    facts: list[str] = []
    asked: list[tuple[int, int, str, str]] = []  # (role fact, answer fact, kind, role)
    for role, name in zip(ROLES[:people], names, strict=False):
        role_fact = len(facts)
        facts.append(rng.choice([f"My {role} is {name}.", f"{name} is my {role}."]))
        for kind, text in _facts_about(rng, name).items():
            asked.append((role_fact, len(facts), kind, role))
            facts.append(text)
    for name in names[people : people + others]:
        about = list(_facts_about(rng, name).values())
        rng.shuffle(about)
        facts += about[: rng.randint(4, 6)]
    order = list(range(len(facts)))
    rng.shuffle(order)
    place = {old: new for new, old in enumerate(order)}
    shuffled = [facts[old] for old in order]
    questions = [
        Question(_question(kind, role), place[r], place[a], kind) for r, a, kind, role in asked
    ]
    return shuffled, questions


def score(ranked: Sequence[int], q: Question) -> dict[str, float]:
    top = set(ranked[:LIMIT])
    rank = next((n + 1 for n, i in enumerate(ranked) if i == q.answer_fact), None)
    return {
        "recall_all@10": float(q.role_fact in top and q.answer_fact in top),
        "answer@10": float(q.answer_fact in top),
        "R@10": ((q.role_fact in top) + (q.answer_fact in top)) / 2,
        "answer MRR": 1 / rank if rank else 0.0,
    }


def _relations_ready(client: McpClient, names: Sequence[str], most_s: float) -> float:
    """Wait until each of ``names`` has its facts in the graph; the seconds waited."""
    started = time.monotonic()
    waiting = list(names)
    while waiting and time.monotonic() - started < most_s:
        found = client.call("query_relations", {"entity": waiting[0], "max_hops": 1})
        if len(found.get("relations", [])) >= len(KINDS) - 1:
            waiting.pop(0)
        else:
            time.sleep(0.2)
    if waiting:
        raise SystemExit(f"relations of {waiting[0]} not extracted within {most_s:.0f}s")
    return time.monotonic() - started


def run(
    workdir: Path, facts: list[str], questions: list[Question], graph_hop: bool
) -> dict[str, Any]:
    """One fresh server: store the facts, ask the questions; per question, the ranked facts."""
    os.environ["RECALL_GRAPH_HOP"] = "true" if graph_hop else "false"
    workdir.mkdir(parents=True, exist_ok=True)
    server = Server(workdir, "graph")
    try:
        client = server.client_for("graph-bench")
        ids: list[int] = []
        for b in range(0, len(facts), 200):
            reply = client.call(
                "remember_batch",
                {"items": [{"text": t} for t in facts[b : b + 200]], "dedup_policy": "insert"},
            )
            ids += [r["memory_id"] for r in reply["results"]]
        index = {memory: n for n, memory in enumerate(ids)}
        role_names = sorted({_named(facts[q.role_fact]) for q in questions})
        waited = _relations_ready(client, role_names, most_s=600)
        ranked, seconds = [], []
        hops = 0
        for q in questions:
            started = time.perf_counter()
            reply = client.call("recall", {"query": q.text, "limit": LIMIT, "explain": True})
            seconds.append(time.perf_counter() - started)
            ranked.append([index[m["id"]] for m in reply["matches"]])
            hops += sum(1 for m in reply["matches"] if m["explain"].get("hop") == "graph")
        client.close()
        return {
            "ranked": ranked,
            "extraction_wait_s": round(waited, 1),
            "recall_p50_ms": round(1000 * statistics.median(seconds), 1),
            "graph_hop_matches": hops,
        }
    finally:
        server.stop()
        os.environ.pop("RECALL_GRAPH_HOP", None)


def _named(role_fact: str) -> str:
    """The full name in "My manager is Ana Silva." / "Ana Silva is my manager."."""
    text = role_fact.rstrip(".")
    return text.split(" is ", 1)[1] if text.startswith("My ") else text.split(" is my ", 1)[0]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--people", type=int, default=12)
    parser.add_argument("--others", type=int, default=300)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--workdir", type=Path, help="default: a temporary directory")
    parser.add_argument(
        "--json", type=Path, help="write the results here too, every question's ranking included"
    )
    args = parser.parse_args(argv)

    facts, questions = store(args.people, args.others, args.seed)
    print(f"{len(facts)} facts, {len(questions)} questions; recall limit {LIMIT}", flush=True)
    systems: dict[str, list[list[int]]] = {}
    details: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ownsona-graph-hop-") as tmp:
        root = args.workdir or Path(tmp)
        for label, on in (("recall, graph hop", True), ("recall, RECALL_GRAPH_HOP=false", False)):
            out = run(root / ("on" if on else "off"), facts, questions, on)
            systems[label] = out.pop("ranked")
            details[label] = out
            print(f"{label}: {out}", flush=True)
    bm25 = BM25(facts)
    systems["BM25"] = [bm25.top(q.text, LIMIT) for q in questions]
    systems["cosine only"] = cosine_rankings([(facts, [q.text for q in questions])], LIMIT)[0]

    metrics = ("recall_all@10", "answer@10", "R@10", "answer MRR")
    print()
    print("| system | n | " + " | ".join(metrics) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in metrics) + " |")
    table: dict[str, dict[str, float]] = {}
    for label, rankings in systems.items():
        scores = [score(r, q) for r, q in zip(rankings, questions, strict=True)]
        table[label] = {m: round(statistics.fmean(s[m] for s in scores), 3) for m in metrics}
        row = " | ".join(f"{table[label][m]:.3f}" for m in metrics)
        print(f"| {label} | {len(questions)} | {row} |")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                    "facts": len(facts),
                    "questions": len(questions),
                    "seed": args.seed,
                    "table": table,
                    "runs": details,
                    # Every question's ranked ids, per system: two runs can be diffed.
                    "rankings": systems,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
