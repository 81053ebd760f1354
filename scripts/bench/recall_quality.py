"""What the recall-quality benchmarks on external data share (``locomo``, ``longmemeval``).

- :class:`Server`: a real ``ownsona serve`` on the embedded default in a fresh
  data directory, one fresh account and token per conversation;
- :func:`ingest`: every turn stored with ``remember_batch`` over ``/mcp``
  (``dedup_policy: insert``), memory ids mapped back to turn keys;
- the baselines computed in the same run over the same turns: :class:`BM25`
  (Okapi, k1 = 1.2, b = 0.75; lower-cased ``\\w+`` tokens, no stemming, no stop
  words) and :func:`cosine_rankings` (the same local model, exact cosine over
  all turns);
- :func:`key_metrics` (recall@k, hit@10, MRR of one ranked key list) and
  :class:`Tally` / :func:`table` (means per group, as a Markdown table).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from scripts.processes import free_port, wait_until_healthy

from .mcp_client import McpClient

#: Items per remember_batch call (the default MAX_BATCH_SIZE).
BATCH = 200


# --- data ----------------------------------------------------------------------


def data_arguments(parser: argparse.ArgumentParser, default: Path, what: str) -> None:
    """``--data`` (files or directories, default ``default``) and ``--json``."""
    parser.add_argument(
        "--data",
        type=Path,
        nargs="+",
        default=[default],
        help=f"{what} files or directories of them (default: %(default)s)",
    )
    parser.add_argument("--json", type=Path, help="also write every per-query ranking here")


def data_files(paths: Sequence[Path], pattern: str, what: str) -> list[Path]:
    """The files named, and those matching ``pattern`` in the directories named (sorted)."""
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.resolve().glob(pattern)) if path.is_dir() else [path.resolve()])
    if not files:
        raise SystemExit(f"no {what} files in {', '.join(map(str, paths))}")
    return files


# --- metrics -------------------------------------------------------------------


def first_seen(ranked: Iterable[str]) -> list[str]:
    """``ranked`` with each key kept at its first place only."""
    return list(dict.fromkeys(ranked))


def key_metrics(
    ranked: Sequence[str], evidence: Iterable[str], ks: Sequence[int]
) -> dict[str, float]:
    """recall@k for each k, hit@10 and reciprocal rank of one query's ranked keys.

    Each key counts once; MRR is 1/rank of the first evidence key, 0 if none.
    """
    seen = first_seen(ranked)
    wanted = set(evidence)
    out = {f"R@{k}": len(wanted & set(seen[:k])) / len(wanted) for k in ks}
    out["hit@10"] = 1.0 if wanted & set(seen[:10]) else 0.0
    out["MRR"] = next((1.0 / (i + 1) for i, key in enumerate(seen) if key in wanted), 0.0)
    return out


@dataclass
class Tally:
    """Per-query metrics of one system, grouped (a query may sit in several groups)."""

    groups: dict[str, list[dict[str, float]]] = field(
        default_factory=lambda: collections.defaultdict(list)
    )

    def add(self, groups: Iterable[str], metrics: dict[str, float]) -> None:
        for group in groups:
            self.groups[group].append(metrics)

    def mean(self, group: str, metrics: Sequence[str]) -> dict[str, float]:
        rows = self.groups[group]
        return {m: sum(r[m] for r in rows) / len(rows) for m in metrics}


def table(tallies: dict[str, Tally], groups: Sequence[str], metrics: Sequence[str]) -> str:
    """A Markdown table: one row per group (in ``groups`` order) and system."""
    lines = [
        "| group | n | system | " + " | ".join(metrics) + " |",
        "| --- | ---: | --- | " + " | ".join("---:" for _ in metrics) + " |",
    ]
    for group in groups:
        for system, tally in tallies.items():
            if not tally.groups.get(group):
                continue
            mean = tally.mean(group, metrics)
            lines.append(
                f"| {group} | {len(tally.groups[group])} | {system} | "
                + " | ".join(f"{mean[m]:.3f}" for m in metrics)
                + " |"
            )
    return "\n".join(lines)


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


def cosine_rankings(
    sets: Sequence[tuple[Sequence[str], Sequence[str]]], k: int, cache: Path | None = None
) -> list[list[list[int]]]:
    """For each (documents, questions): each question's top-``k`` documents by exact cosine.

    The local model embeds both. With ``cache`` (a directory), each set's document
    vectors are kept there under a digest of the model and the texts, for the next run.
    """
    from memory.providers.embedders import LOCAL_MODEL_ID, LocalEmbedder

    from .core import embed_cached

    embedder = LocalEmbedder.bundled()
    try:
        out = []
        for docs, questions in sets:
            if cache is None:
                vectors = asyncio.run(embedder.embed(list(docs)))
            else:
                digest = hashlib.sha256("\0".join([LOCAL_MODEL_ID, *docs]).encode()).hexdigest()
                cache.mkdir(parents=True, exist_ok=True)
                vectors = embed_cached(embedder, list(docs), cache / f"cosine-{digest[:24]}.npy")
            sims = np.asarray(asyncio.run(embedder.embed(list(questions)))) @ np.asarray(vectors).T
            out.append([[int(i) for i in np.argsort(-row, kind="stable")[:k]] for row in sims])
        return out
    finally:
        asyncio.run(embedder.aclose())


def stored_cosine(
    server: Server, usernames: Sequence[str], questions: Sequence[str], k: int
) -> list[list[tuple[int, float]]]:
    """The cosine baseline from the vectors the server stored: for each account, its
    question's top-``k`` memory ids by exact cosine over all its active memories.

    The same local model embedded them (on the server), so the ranking is the one
    :func:`cosine_rankings` gives, without embedding every turn a second time; turns
    the server refused (secrets) are not among them.
    """
    from pgvector.psycopg import register_vector_async

    from memory.providers.embedders import LocalEmbedder
    from storage import embedded, scans, users

    async def read() -> list[list[tuple[int, float]]]:
        import psycopg

        embedder = LocalEmbedder.bundled()
        dsn = embedded.start_embedded(server.workdir / "data")
        try:
            asked = np.asarray(await embedder.embed(list(questions)))
            out = []
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                await register_vector_async(conn)
                for name, q in zip(usernames, asked, strict=True):
                    user = await users.get_user_by_username(conn, name)
                    assert user is not None, name
                    have = await scans.active_vectors(conn, user.id)
                    sims = have.vectors @ q
                    top = np.argsort(-sims, kind="stable")[:k]
                    out.append([(have.ids[i], float(sims[i])) for i in top])
            return out
        finally:
            await embedder.aclose()

    return asyncio.run(read())


# --- the server ----------------------------------------------------------------


class Server:
    """``ownsona serve`` on the embedded default in a fresh data directory."""

    def __init__(self, workdir: Path, name: str) -> None:
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
            "OWNSONA_LOGIN_USERNAME": f"{name}-admin",
            "OWNSONA_LOGIN_PASSWORD": f"{name}-admin-password",
        }
        # Closed in stop(): the server writes to it for the whole benchmark.
        log = workdir / "serve.log"
        log = log.with_name(f"serve-{port}.log") if log.exists() else log  # a kept store's
        self.log = open(log, "w")  # noqa: SIM115
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
            raise SystemExit(f"ownsona serve {what}; see {log}")

    def _cli(self, *args: str, stdin: str | None = None) -> str:
        return self._cli_lines(*args, stdin=stdin)[-1]

    def _cli_lines(self, *args: str, stdin: str | None = None) -> list[str]:
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
        return out.stdout.strip().splitlines()

    def client_for(self, username: str) -> McpClient:
        """A fresh account and an MCP client holding a token for it."""
        self._cli("user", "add", username, stdin=f"{username}-password-{os.getpid()}\n")
        return self.client_of(username)

    def has_user(self, username: str) -> bool:
        """Whether the account exists (``ownsona user list``)."""
        return any(line.split()[:1] == [username] for line in self._cli_lines("user", "list"))

    def client_of(self, username: str) -> McpClient:
        """An MCP client holding a token for an account that exists (a kept store's)."""
        token = self._cli("token", "--user", username, "--ttl", "86400")
        return McpClient(self.url, token)

    def stop(self, *, keep_database: bool = False) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        if keep_database:
            return  # another run uses it
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs, about XDG_RUNTIME_DIR
            from storage.embedded import stop_embedded

            stop_embedded(self.workdir / "data")


class KeptStore:
    """What a kept store's directory holds: per account, the turns stored and their ids."""

    def __init__(self, where: Path, options: str) -> None:
        self.file = where / "stored.json"
        self.options = options
        data = json.loads(self.file.read_text()) if self.file.exists() else {}
        self.accounts: dict[str, Any] = (
            data.get("accounts", {}) if data.get("options") == options else {}
        )
        if data and data.get("options") != options:
            raise SystemExit(f"{where} holds a store made with other options ({data['options']})")

    def get(
        self, name: str, keys: Sequence[str], texts: Sequence[str]
    ) -> tuple[str, dict[int, list[str]], list[str]] | None:
        """The account the question's turns were stored in, their ids, the refused turns."""
        was = self.accounts.get(name)
        if was is None or was["keys"] != list(keys) or was["texts"] != _digest(texts):
            return None
        keys_of = {int(i): ks for i, ks in was["keys_of"].items()}
        return was.get("user", name), keys_of, list(was["refused"])

    def put(
        self,
        name: str,
        keys: Sequence[str],
        texts: Sequence[str],
        user: str,
        keys_of: Mapping[int, list[str]],
        refused: list[str],
    ) -> None:
        self.accounts[name] = {
            "user": user,
            "keys": list(keys),
            "texts": _digest(texts),
            "keys_of": {str(i): ks for i, ks in keys_of.items()},
            "refused": refused,
        }
        self.file.write_text(json.dumps({"options": self.options, "accounts": self.accounts}))


def _digest(texts: Sequence[str]) -> str:
    return hashlib.sha256("\0".join(texts).encode()).hexdigest()


def username(prefix: str, n: int, sample_id: str) -> str:
    """An account name for the ``n``-th conversation: lower-case letters, digits, dashes."""
    return f"{prefix}-{n}-{re.sub(r'[^a-z0-9]+', '-', sample_id.lower())}"


def ingest(
    client: McpClient, label: str, keys: Sequence[str], items: Sequence[dict[str, Any]]
) -> tuple[dict[int, list[str]], list[str]]:
    """Store every item (``remember`` arguments) with remember_batch.

    Returns memory id -> turn keys, and the keys of the turns the server refused
    as secrets (``SECRET_REJECTED``: a failed item fails alone, as for any client;
    such a turn is not stored and cannot be recalled). Any other failure ends the run.
    """
    by_id: dict[int, list[str]] = collections.defaultdict(list)
    refused: list[str] = []
    for start in range(0, len(items), BATCH):
        out = client.call(
            "remember_batch",
            {"items": list(items[start : start + BATCH]), "dedup_policy": "insert"},
        )
        for key, result in zip(keys[start : start + BATCH], out["results"], strict=True):
            if result["ok"]:
                by_id[int(result["memory_id"])].append(key)  # an exact repeat: the first copy
            elif result["error"]["code"] == "SECRET_REJECTED":
                refused.append(key)
            else:
                raise SystemExit(f"{label}: remember_batch failed for {key}: {result['error']}")
    return by_id, refused
