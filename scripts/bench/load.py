"""Many clients at once: concurrent MCP clients over HTTP against one server (issue 16).

    python -m scripts.bench.load [--phases single,recall:32,mix:50] [--seconds 30]
        [--memories 2000] [--redis] [--tree PATH] [--workdir .bench/load] [--json]

Starts a real ``ownsona serve`` (embedded PostgreSQL; the in-process worker, or
with ``--redis`` a Redis broker at ``REDIS_URL`` and a separate ``ownsona
worker``), seeds one account with ``--memories`` synthetic facts (embedded by
the local model, cached in the work directory, copied straight into
PostgreSQL as ``core.py`` does) and runs the phases one after another, each
for ``--seconds``:

- ``single``: one client, ``recall`` back to back: the rate the concurrent
  recall phase is compared with (same run, same machine);
- ``recall:N``: N clients, ``recall`` only;
- ``mix:N``: N clients, 80% reads (recall, text_search, list_memories,
  get_memory, count_memories) and 20% writes (remember, update_memory,
  forget), drawn per call from :data:`MIX`.

Every client is an ``httpx.AsyncClient`` limited to one connection, with its
own bearer token (``--tokens`` are minted and dealt round-robin), calling back
to back. Prints requests/s, p50/p95/p99 per tool and overall, and errors by
kind; ``--json`` prints the same as JSON. ``--tree`` runs the server from
another checkout (a baseline worktree) while the load generator stays this
one, so two trees can be compared in alternating runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
import psycopg

from memory.providers.embedders import LocalEmbedder
from scripts.processes import free_port, wait_until_healthy
from storage.embedded import start_embedded, stop_embedded

from . import corpus
from .core import embed_cached, pct, seed
from .mcp_client import tools_call
from .runs import run_facts, work_directory

#: The 80/20 mix: tool -> weight (percent). Writes are remember, update_memory, forget.
MIX: dict[str, int] = {
    "recall": 35,
    "text_search": 15,
    "list_memories": 15,
    "get_memory": 10,
    "count_memories": 5,
    "remember": 10,
    "update_memory": 5,
    "forget": 5,
}
#: Reads that embed nothing: they should never wait behind embeddings.
EMBEDDING_FREE = ("list_memories", "get_memory", "count_memories", "text_search")
#: Words ``text_search`` looks for (names and places of the corpus).
SEARCH_WORDS = ("Priya", "Omar", "sister", "Lisbon", "coffee", "doctor", "Mei", "cousin")


@dataclass
class Server:
    """``ownsona serve`` (and with Redis, one ``ownsona worker``) from ``tree``."""

    workdir: Path
    tree: Path
    redis_url: str | None
    worker_threads: int
    port: int = field(default_factory=free_port)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[IO[str]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("DATABASE_URL", "REDIS_URL", "OWNSONA_PUBLIC_URL", "PYTHONPATH")
        }
        env.update(
            PYTHONPATH=str(self.tree),
            PORT=str(self.port),
            OWNSONA_DATA_DIR=str(self.workdir / "data"),
            OWNSONA_LOGIN_USERNAME="bench",
            OWNSONA_LOGIN_PASSWORD="bench-password",
        )
        if self.redis_url:
            env["REDIS_URL"] = self.redis_url
        return env

    def _spawn(self, args: list[str], log_name: str) -> subprocess.Popen[bytes]:
        # Closed in stop(): the process writes to it until then.
        log = open(self.workdir / log_name, "a")  # noqa: SIM115
        self.logs.append(log)
        proc = subprocess.Popen(
            [sys.executable, "-m", "scripts.cli", *args],
            env=self.env,
            cwd=self.tree,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.procs.append(proc)
        return proc

    def start(self) -> None:
        serve = self._spawn(["serve"], "serve.log")
        problem = wait_until_healthy(self.url, serve, timeout_s=180)
        if problem is not None:
            self.stop()
            raise SystemExit(f"server {problem}; see {self.workdir / 'serve.log'}")
        if self.redis_url:
            self._spawn(["worker", "--threads", str(self.worker_threads)], "worker.log")

    def tokens(self, count: int) -> list[str]:
        def mint(_: int) -> str:
            out = subprocess.run(
                [sys.executable, "-m", "scripts.cli", "token", "--user", "bench", "--ttl", "86400"],
                env=self.env,
                cwd=self.tree,
                capture_output=True,
                text=True,
                check=True,
            )
            return out.stdout.strip().splitlines()[-1]

        with ThreadPoolExecutor(min(count, 4)) as pool:
            return list(pool.map(mint, range(count)))

    def stop(self) -> None:
        for proc in reversed(self.procs):  # the worker first
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()
        for log in self.logs:
            log.close()
        self.logs.clear()


# --- the clients -------------------------------------------------------------------


@dataclass
class Tally:
    """Latencies per tool (seconds) and errors by kind, for one phase."""

    times: dict[str, list[float]] = field(default_factory=dict)
    errors: Counter[str] = field(default_factory=Counter)

    def add(self, tool: str, seconds: float) -> None:
        self.times.setdefault(tool, []).append(seconds)


class CallFailed(Exception):
    """A call that did not come back ``ok``; ``kind`` is what the error table counts."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class Client:
    """One MCP client: its own connection and token, one call at a time."""

    def __init__(self, url: str, token: str, n: int, seeded_ids: list[int]) -> None:
        self.http = httpx.AsyncClient(
            base_url=url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=120,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        )
        self.n = n
        self.rng = random.Random(1000 + n)
        self.seeded_ids = seeded_ids
        self.mine: list[int] = []  # memories this client remembered (and may edit or forget)
        self.questions = corpus.questions(200, seed=100 + n)
        self.writes = 0
        self.next_id = 0

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        try:
            reply = await self.http.post(
                "/mcp",
                json=tools_call(self.next_id, tool, arguments),
            )
        except httpx.HTTPError as ex:
            raise CallFailed(type(ex).__name__) from ex
        if reply.status_code != 200:
            raise CallFailed(f"HTTP {reply.status_code}")
        body = reply.json()
        if "error" in body:
            raise CallFailed(f"JSON-RPC {body['error'].get('code')}")
        payload: dict[str, Any] = body["result"]["structuredContent"]
        if not payload.get("ok"):
            raise CallFailed(f"{tool}: {payload.get('error', {}).get('code')}")
        return payload

    def arguments(self, tool: str) -> tuple[str, dict[str, Any]]:
        """The tool actually called (forget with nothing to forget remembers) and its arguments."""
        rng = self.rng
        if tool == "recall":
            return tool, {"query": rng.choice(self.questions), "limit": 8}
        if tool == "text_search":
            return tool, {"text": rng.choice(SEARCH_WORDS), "limit": 20}
        if tool == "list_memories":
            return tool, {"limit": 20, "offset": rng.randrange(0, 200)}
        if tool == "get_memory":
            return tool, {"id": rng.choice(self.seeded_ids)}
        if tool == "count_memories":
            return tool, {}
        if tool == "update_memory" and self.mine:
            return tool, {"id": rng.choice(self.mine), "importance": round(rng.random(), 2)}
        if tool == "forget" and self.mine:
            return tool, {"id": self.mine.pop(rng.randrange(len(self.mine)))}
        self.writes += 1
        text = next(iter(corpus.facts(1, seed=self.n * 100_000 + self.writes)))
        return "remember", {"text": f"Load client {self.n} note {self.writes}: {text}"}

    async def run(self, tools: list[str], weights: list[int], until: float, tally: Tally) -> None:
        while time.perf_counter() < until:
            tool, arguments = self.arguments(self.rng.choices(tools, weights)[0])
            started = time.perf_counter()
            try:
                payload = await self.call(tool, arguments)
            except CallFailed as ex:
                tally.errors[ex.kind] += 1
                continue
            tally.add(tool, time.perf_counter() - started)
            if tool == "remember" and payload.get("message") == "Ok":
                self.mine.append(int(payload["memory_id"]))

    async def aclose(self) -> None:
        await self.http.aclose()


async def run_phase(
    url: str, tokens: list[str], seeded_ids: list[int], *, clients: int, mix: bool, seconds: float
) -> dict[str, Any]:
    tools, weights = (list(MIX), list(MIX.values())) if mix else (["recall"], [1])
    pool = [Client(url, tokens[n % len(tokens)], n, seeded_ids) for n in range(clients)]
    tally = Tally()
    try:
        # Warm each connection (and the server's caches) before the clock starts.
        await asyncio.gather(*(c.call("count_memories", {}) for c in pool))
        started = time.perf_counter()
        until = started + seconds
        await asyncio.gather(*(c.run(tools, weights, until, tally) for c in pool))
        elapsed = time.perf_counter() - started
    finally:
        await asyncio.gather(*(c.aclose() for c in pool))
    return report(tally, clients=clients, elapsed=elapsed, mix=mix)


def _stats(values_s: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values_s]
    return {
        "n": len(ms),
        "p50": round(pct(ms, 50), 1),
        "p95": round(pct(ms, 95), 1),
        "p99": round(pct(ms, 99), 1),
    }


def report(tally: Tally, *, clients: int, elapsed: float, mix: bool) -> dict[str, Any]:
    every = [t for times in tally.times.values() for t in times]
    done = len(every)
    free = [t for tool in EMBEDDING_FREE[:3] for t in tally.times.get(tool, [])]
    return {
        "clients": clients,
        "mix": mix,
        "seconds": round(elapsed, 1),
        "requests": done,
        "rps": round(done / elapsed, 1),
        "overall": _stats(every) if every else None,
        "tools": {tool: _stats(times) for tool, times in sorted(tally.times.items())},
        "embedding_free": _stats(free) if free else None,
        "errors": dict(tally.errors),
    }


# --- the run -----------------------------------------------------------------------


def prepare_store(server: Server, workdir: Path, memories: int) -> tuple[str, int, list[int]]:
    """Seed the bench account with ``memories`` facts; (dsn, user id, seeded ids)."""
    dsn = start_embedded(workdir / "data")
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT id FROM users WHERE username = 'bench'").fetchone()
        assert row is not None, "the server creates the bench account on start"
        user_id = int(row[0])
        conn.execute("DELETE FROM memories WHERE user_id = %s", (user_id,))
        conn.execute("DELETE FROM write_receipts WHERE user_id = %s", (user_id,))
    texts = list(corpus.facts(memories))
    cache_dir = Path(os.environ.get("OWNSONA_BENCH_CACHE", str(workdir.parent)))
    cache_dir.mkdir(parents=True, exist_ok=True)
    vectors = embed_cached(LocalEmbedder.bundled(), texts, cache_dir / f"facts-{memories}.npy")
    seed(dsn, user_id, texts, vectors, 0)
    with psycopg.connect(dsn, autocommit=True) as conn:
        ids = [
            int(r[0])
            for r in conn.execute(
                "SELECT id FROM memories WHERE user_id = %s ORDER BY id", (user_id,)
            ).fetchall()
        ]
    return dsn, user_id, ids


def parse_phases(text: str) -> list[tuple[str, int]]:
    phases = []
    for part in text.split(","):
        name, _, count = part.partition(":")
        if name == "single":
            phases.append(("single", 1))
        elif name in ("recall", "mix") and count.isdigit():
            phases.append((name, int(count)))
        else:
            raise SystemExit(f"--phases: {part!r} is not single, recall:N or mix:N")
    return phases


def print_table(results: dict[str, Any]) -> None:
    print(f"\n{results['label']}: {results['memories']} memories, {results['shape']}")
    for name, phase in results["phases"].items():
        o = phase["overall"] or {}
        print(
            f"\n{name}: {phase['clients']} clients, {phase['requests']} requests in "
            f"{phase['seconds']} s = {phase['rps']} req/s; errors {phase['errors'] or 0}"
        )
        if "vs_single" in phase:
            print(f"  vs single-client recall rate: {phase['vs_single']}x")
        print(f"  {'tool':<16}{'n':>7}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}")
        rows = [*phase["tools"].items(), ("(all)", o)]
        if phase["mix"] and phase["embedding_free"]:
            rows.append(("(embedding-free)", phase["embedding_free"]))
        for tool, s in rows:
            print(f"  {tool:<16}{s['n']:>7}{s['p50']:>10}{s['p95']:>10}{s['p99']:>10}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--phases", default="single,recall:32,mix:50")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--tokens", type=int, default=4, help="bearer tokens dealt to clients")
    parser.add_argument("--redis", action="store_true", help="REDIS_URL + a separate worker")
    parser.add_argument("--worker-threads", type=int, default=4)
    parser.add_argument("--tree", default=".", help="checkout the server runs from")
    parser.add_argument("--label", default=None, help="name of this run in the output")
    parser.add_argument("--workdir", default=".bench/load")
    parser.add_argument("--fresh", action="store_true", help="delete the work directory first")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    phases = parse_phases(args.phases)
    redis_url = os.environ.get("REDIS_URL") if args.redis else None
    if args.redis and not redis_url:
        raise SystemExit("--redis needs REDIS_URL")
    tree = Path(args.tree).resolve()
    workdir = work_directory(args.workdir, fresh=args.fresh)
    if redis_url:
        import redis

        redis.Redis.from_url(redis_url).flushdb()  # no queued writes of an earlier run

    server = Server(workdir, tree, redis_url, args.worker_threads)
    server.start()
    results: dict[str, Any] = {
        **run_facts(),
        "label": args.label or tree.name,
        "tree": str(tree),
        "shape": "redis + worker" if redis_url else "embedded default",
        "memories": args.memories,
        "phases": {},
    }
    try:
        _, _, ids = prepare_store(server, workdir, args.memories)
        tokens = server.tokens(args.tokens)
        single_rps = None
        for name, clients in phases:
            phase = asyncio.run(
                run_phase(
                    server.url,
                    tokens,
                    ids,
                    clients=clients,
                    mix=name == "mix",
                    seconds=args.seconds,
                )
            )
            if name == "single":
                single_rps = phase["rps"]
            elif name == "recall" and single_rps:
                phase["vs_single"] = round(phase["rps"] / single_rps, 2)
            key = "single" if name == "single" else f"{name}_{clients}"
            results["phases"][key] = phase
            if not args.json:
                print(f"{key}: {phase['rps']} req/s", file=sys.stderr, flush=True)
    finally:
        server.stop()
        stop_embedded(workdir / "data")
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print_table(results)
    (workdir / "results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
