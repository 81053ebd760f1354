"""Recall quality on LoCoMo: OwnSona's recall tool beside BM25 and cosine-only baselines.

    python -m scripts.bench.locomo [--data ../shared/eval/locomo] [--limit 20] [--json out.json]

Data: LoCoMo, "Evaluating Very Long-Term Conversational Memory of LLM
Agents", Maharana, Lee, Tulyakov, Bansal, Barbieri, Fang (ACL 2024,
arXiv:2402.17753), from the GitHub repository snap-research/locomo
(data/locomo10.json), licensed CC BY-NC 4.0
(https://creativecommons.org/licenses/by-nc/4.0/): non-commercial use only.
The files this script reads are restructured as described in the data
directory's README.md (one file per conversation; memories and queries).

What it does, through the real tools of a real server:

- starts ``ownsona serve`` on the embedded default (a fresh data directory,
  the local embedder, the in-process worker);
- for each conversation, creates a fresh account (``ownsona user add``),
  mints a token (``ownsona token``) and stores every dialogue turn's
  ``text`` as one memory with ``remember_batch`` over ``/mcp``
  (``dedup_policy: insert``: every turn is kept). Only ``text`` is stored,
  as a user would store it; the ``image_caption`` of turns that shared an
  image is not, so evidence that lives only in a caption can be missed;
- asks every question with ``recall`` (``limit`` 20 by default) and maps the
  returned ids back to turn keys;
- computes, in the same run and over the same turns, two baselines: Okapi
  BM25 (k1 = 1.2, b = 0.75; lower-cased ``\\w+`` tokens, no stemming, no stop
  words) and cosine-only (the same local model, exact cosine over all turns);
- prints recall@1/5/10/20, hit@10 and MRR (1/rank of the first evidence key
  in the returned list, 0 if none): overall, for categories 1-4 and per
  category (LoCoMo's codes: 1 multi-hop, 2 temporal, 3 open-domain,
  4 single-hop, 5 adversarial).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import recall_quality as rq

DEFAULT_DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "eval" / "locomo"
ATTRIBUTION = (
    "Data: LoCoMo (Maharana et al., ACL 2024, arXiv:2402.17753), snap-research/locomo, "
    "CC BY-NC 4.0 (non-commercial use only)."
)
KS = (1, 5, 10, 20)
CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}


# --- data ----------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    id: str
    question: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    keys: tuple[str, ...]
    texts: tuple[str, ...]
    queries: tuple[Query, ...]


def load(paths: Sequence[Path]) -> list[Conversation]:
    out = []
    for file in rq.data_files(paths, "*.json", "LoCoMo"):
        data = json.loads(file.read_text("utf-8"))
        out.append(
            Conversation(
                sample_id=str(data["sample_id"]),
                keys=tuple(m["key"] for m in data["memories"]),
                texts=tuple(m["text"] for m in data["memories"]),
                queries=tuple(
                    Query(q["id"], q["question"], int(q["category"]), tuple(q["evidence"]))
                    for q in data["queries"]
                ),
            )
        )
    return out


# --- metrics -------------------------------------------------------------------

METRICS = (*(f"R@{k}" for k in KS), "hit@10", "MRR")


def groups_of(category: int) -> list[str]:
    """The groups a question of ``category`` counts in."""
    named = f"cat {category} {CATEGORY_NAMES.get(category, '')}".strip()
    return ["all", named] if category == 5 else ["all", "cats 1-4", named]


# --- report --------------------------------------------------------------------


def report(tallies: dict[str, rq.Tally]) -> str:
    """The Markdown table: all, cats 1-4, then each category."""
    first = next(iter(tallies.values()))
    groups = ["all", "cats 1-4", *sorted(g for g in first.groups if g.startswith("cat "))]
    return rq.table(tallies, groups, METRICS)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    rq.data_arguments(parser, DEFAULT_DATA, "LoCoMo-format")
    parser.add_argument("--limit", type=int, default=20, help="recall limit (default 20)")
    parser.add_argument(
        "--workdir", type=Path, help="where the server's data goes (default: a temp dir)"
    )
    args = parser.parse_args(argv)

    conversations = load(args.data)
    print(ATTRIBUTION)
    print(
        f"{len(conversations)} conversations, {sum(len(c.texts) for c in conversations)} memories, "
        f"{sum(len(c.queries) for c in conversations)} queries; recall limit {args.limit}"
    )

    tallies = {"ownsona recall": rq.Tally(), "BM25": rq.Tally(), "cosine only": rq.Tally()}
    dump: list[dict[str, Any]] = []
    cosine = rq.cosine_rankings(
        [(c.texts, [q.question for q in c.queries]) for c in conversations], args.limit
    )

    with tempfile.TemporaryDirectory(prefix="ownsona-locomo-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        server = rq.Server(workdir, "locomo")
        try:
            for n, conv in enumerate(conversations):
                client = server.client_for(rq.username("locomo", n, conv.sample_id))
                started = time.perf_counter()
                # Each LoCoMo session is one conversation: its turns share a session_id.
                items = [
                    {"text": t, "session_id": f"{conv.sample_id}:{k.split(':')[0]}"}
                    for k, t in zip(conv.keys, conv.texts, strict=True)
                ]
                keys_of, refused = rq.ingest(client, conv.sample_id, conv.keys, items)
                ingested = time.perf_counter() - started
                bm25 = rq.BM25(conv.texts)
                started = time.perf_counter()
                for qi, query in enumerate(conv.queries):
                    matches = client.call(
                        "recall", {"query": query.question, "limit": args.limit, "explain": True}
                    )["matches"]
                    ours = [k for m in matches for k in keys_of[int(m["id"])]]
                    lexical = [conv.keys[i] for i in bm25.top(query.question, args.limit)]
                    semantic = [conv.keys[i] for i in cosine[n][qi]]
                    for system, ranked in (
                        ("ownsona recall", ours),
                        ("BM25", lexical),
                        ("cosine only", semantic),
                    ):
                        tallies[system].add(
                            groups_of(query.category), rq.key_metrics(ranked, query.evidence, KS)
                        )
                    dump.append(
                        {
                            "id": query.id,
                            "category": query.category,
                            "evidence": query.evidence,
                            "ownsona": ours,
                            "bm25": lexical,
                            "cosine": semantic,
                            "explain": [
                                {"keys": keys_of[int(m["id"])], **m["explain"]} for m in matches
                            ],
                        }
                    )
                asked = time.perf_counter() - started
                client.close()
                print(
                    f"{conv.sample_id}: {len(conv.texts)} turns sent in {ingested:.1f}s "
                    f"({len(refused)} refused as secrets), "
                    f"{len(conv.queries)} questions in {asked:.1f}s",
                    flush=True,
                )
        finally:
            server.stop()

    print()
    print(report(tallies))
    if args.json:
        args.json.write_text(json.dumps(dump, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
