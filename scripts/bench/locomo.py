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
import asyncio
import collections
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from scripts.processes import free_port, wait_until_healthy

from .mcp_client import McpClient

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
#: Items per remember_batch call (the default MAX_BATCH_SIZE).
BATCH = 200


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
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.glob("*.json")) if path.is_dir() else [path])
    if not files:
        raise SystemExit(f"no LoCoMo files in {', '.join(map(str, paths))}")
    out = []
    for file in files:
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


def query_metrics(ranked: Sequence[str], evidence: Iterable[str]) -> dict[str, float]:
    """recall@k, hit@10 and reciprocal rank of one query's ranked keys (each key counted once)."""
    seen: list[str] = []
    for key in ranked:
        if key not in seen:
            seen.append(key)
    wanted = set(evidence)
    out = {f"R@{k}": len(wanted & set(seen[:k])) / len(wanted) for k in KS}
    out["hit@10"] = 1.0 if wanted & set(seen[:10]) else 0.0
    out["MRR"] = next((1.0 / (i + 1) for i, key in enumerate(seen) if key in wanted), 0.0)
    return out


METRICS = (*(f"R@{k}" for k in KS), "hit@10", "MRR")


@dataclass
class Tally:
    """Per-query metrics of one system, grouped."""

    groups: dict[str, list[dict[str, float]]] = field(
        default_factory=lambda: collections.defaultdict(list)
    )

    def add(self, category: int, metrics: dict[str, float]) -> None:
        self.groups["all"].append(metrics)
        if category != 5:
            self.groups["cats 1-4"].append(metrics)
        self.groups[f"cat {category} {CATEGORY_NAMES.get(category, '')}".strip()].append(metrics)

    def mean(self, group: str) -> dict[str, float]:
        rows = self.groups[group]
        return {m: sum(r[m] for r in rows) / len(rows) for m in METRICS}


# --- baselines -----------------------------------------------------------------

_TOKEN = re.compile(r"\w+")


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class BM25:
    """Okapi BM25 over a fixed list of documents (k1 = 1.2, b = 0.75, Lucene's IDF)."""

    def __init__(self, docs: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.tfs = [collections.Counter(_tokens(d)) for d in docs]
        self.lengths = [sum(tf.values()) for tf in self.tfs]
        self.avg = sum(self.lengths) / max(1, len(self.lengths))
        self.df = collections.Counter(t for tf in self.tfs for t in tf)
        self.postings: dict[str, list[int]] = collections.defaultdict(list)
        for i, tf in enumerate(self.tfs):
            for t in tf:
                self.postings[t].append(i)

    def top(self, query: str, k: int) -> list[int]:
        n = len(self.tfs)
        scores: dict[int, float] = collections.defaultdict(float)
        for t in set(_tokens(query)):
            df = self.df.get(t, 0)
            if not df:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            for i in self.postings[t]:
                f = self.tfs[i][t]
                norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
                scores[i] += idf * f * (self.k1 + 1) / (f + norm)
        return sorted(scores, key=lambda i: (-scores[i], i))[:k]


async def cosine_rankings(conversations: Sequence[Conversation], k: int) -> list[list[list[int]]]:
    """For each conversation and question: the top-``k`` turns by exact cosine (local model)."""
    from memory.providers.embedders import LocalEmbedder

    embedder = LocalEmbedder.bundled()
    try:
        out = []
        for conv in conversations:
            docs = np.asarray(await embedder.embed(list(conv.texts)))
            questions = np.asarray(await embedder.embed([q.question for q in conv.queries]))
            sims = questions @ docs.T
            out.append([list(np.argsort(-row, kind="stable")[:k]) for row in sims])
        return out
    finally:
        await embedder.aclose()


# --- the server ----------------------------------------------------------------


class Server:
    """``ownsona serve`` on the embedded default in a fresh data directory."""

    def __init__(self, workdir: Path) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.workdir = workdir
        self.env = {
            **{
                k: v
                for k, v in os.environ.items()
                if k not in ("DATABASE_URL", "REDIS_URL", "OWNSONA_PUBLIC_URL")
            },
            "PORT": str(port),
            "OWNSONA_DATA_DIR": str(workdir / "data"),
            "OWNSONA_LOGIN_USERNAME": "locomo-admin",
            "OWNSONA_LOGIN_PASSWORD": "locomo-admin-password",
        }
        # Closed in stop(): the server writes to it for the whole benchmark.
        self.log = open(workdir / "serve.log", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "scripts.cli", "serve"],
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        problem = wait_until_healthy(
            self.url, self.proc, timeout_s=180, probe_timeout_s=2, poll_s=0.2
        )
        if problem is not None:
            what = "exited" if self.proc.poll() is not None else "did not come up"
            raise SystemExit(f"ownsona serve {what}; see {workdir / 'serve.log'}")

    def _cli(self, *args: str, stdin: str | None = None) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "scripts.cli", *args],
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if out.returncode != 0:
            raise SystemExit(f"ownsona {' '.join(args)} failed: {out.stderr.strip()}")
        return out.stdout.strip().splitlines()[-1]

    def client_for(self, username: str) -> McpClient:
        """A fresh account and an MCP client holding a token for it."""
        self._cli("user", "add", username, stdin=f"{username}-password-{os.getpid()}\n")
        token = self._cli("token", "--user", username, "--ttl", "86400")
        return McpClient(self.url, token)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs, about XDG_RUNTIME_DIR
            from storage.embedded import stop_embedded

            stop_embedded(self.workdir / "data")


def ingest(client: McpClient, conv: Conversation) -> dict[int, list[str]]:
    """Store every turn with remember_batch; return memory id -> turn keys."""
    by_id: dict[int, list[str]] = collections.defaultdict(list)
    for start in range(0, len(conv.texts), BATCH):
        keys = conv.keys[start : start + BATCH]
        texts = conv.texts[start : start + BATCH]
        out = client.call(
            "remember_batch", {"items": [{"text": t} for t in texts], "dedup_policy": "insert"}
        )
        if out["summary"]["failed"]:
            raise SystemExit(
                f"{conv.sample_id}: remember_batch failed for some items: {out['results']}"
            )
        for key, result in zip(keys, out["results"], strict=True):
            by_id[int(result["memory_id"])].append(key)  # an exact repeat maps to the first copy
    return by_id


# --- report --------------------------------------------------------------------


def table(tallies: dict[str, Tally]) -> str:
    """A Markdown table: one row per group and system."""
    first = next(iter(tallies.values()))
    groups = ["all", "cats 1-4", *sorted(g for g in first.groups if g.startswith("cat "))]
    lines = [
        "| group | n | system | " + " | ".join(METRICS) + " |",
        "| --- | ---: | --- | " + " | ".join("---:" for _ in METRICS) + " |",
    ]
    for group in groups:
        for system, tally in tallies.items():
            if group not in tally.groups:
                continue
            mean = tally.mean(group)
            lines.append(
                f"| {group} | {len(tally.groups[group])} | {system} | "
                + " | ".join(f"{mean[m]:.3f}" for m in METRICS)
                + " |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data",
        type=Path,
        nargs="+",
        default=[DEFAULT_DATA],
        help="LoCoMo-format files or directories of them (default: %(default)s)",
    )
    parser.add_argument("--limit", type=int, default=20, help="recall limit (default 20)")
    parser.add_argument(
        "--workdir", type=Path, help="where the server's data goes (default: a temp dir)"
    )
    parser.add_argument("--json", type=Path, help="also write every per-query ranking here")
    args = parser.parse_args(argv)

    conversations = load([p.resolve() for p in args.data])
    print(ATTRIBUTION)
    print(
        f"{len(conversations)} conversations, {sum(len(c.texts) for c in conversations)} memories, "
        f"{sum(len(c.queries) for c in conversations)} queries; recall limit {args.limit}"
    )

    tallies = {"ownsona recall": Tally(), "BM25": Tally(), "cosine only": Tally()}
    dump: list[dict[str, Any]] = []
    cosine = asyncio.run(cosine_rankings(conversations, args.limit))

    with tempfile.TemporaryDirectory(prefix="ownsona-locomo-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        server = Server(workdir)
        try:
            for n, conv in enumerate(conversations):
                client = server.client_for(
                    f"locomo-{n}-{re.sub(r'[^a-z0-9]+', '-', conv.sample_id.lower())}"
                )
                started = time.perf_counter()
                keys_of = ingest(client, conv)
                ingested = time.perf_counter() - started
                bm25 = BM25(conv.texts)
                started = time.perf_counter()
                for qi, query in enumerate(conv.queries):
                    matches = client.call("recall", {"query": query.question, "limit": args.limit})[
                        "matches"
                    ]
                    ours = [k for m in matches for k in keys_of[int(m["id"])]]
                    lexical = [conv.keys[i] for i in bm25.top(query.question, args.limit)]
                    semantic = [conv.keys[i] for i in cosine[n][qi]]
                    for system, ranked in (
                        ("ownsona recall", ours),
                        ("BM25", lexical),
                        ("cosine only", semantic),
                    ):
                        tallies[system].add(query.category, query_metrics(ranked, query.evidence))
                    dump.append(
                        {
                            "id": query.id,
                            "category": query.category,
                            "evidence": query.evidence,
                            "ownsona": ours,
                            "bm25": lexical,
                            "cosine": semantic,
                        }
                    )
                asked = time.perf_counter() - started
                client.close()
                print(
                    f"{conv.sample_id}: {len(conv.texts)} memories stored in {ingested:.1f}s, "
                    f"{len(conv.queries)} questions in {asked:.1f}s",
                    flush=True,
                )
        finally:
            server.stop()

    print()
    print(table(tallies))
    if args.json:
        args.json.write_text(json.dumps(dump, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
