"""The audit record's cost: a cheap read tool with the audit log on and off, same run.

    python -m scripts.bench.audit [--iterations 5000] [--workdir .bench/audit]

One pool over an embedded PostgreSQL (in the work directory), the real use
cases, and the step ``McpDispatcher.call_tool`` adds for the audit log: after
the use case answers, ``AuditLog.record`` with the call's arguments and
payload (finding the memory ids, appending to the buffer), and the log's
background flush (a COPY every 0.5 s) on the same event loop. (The benchmarks
may not import ``api``; everything else the dispatcher does is the same with
the log on or off.) Each iteration calls ``count_memories`` and
``get_memory`` with the log on and off, in a random order, so both arms see
the same machine noise; the flush is paid for in the "on" arm's figures.

It prints p50/p95 per tool and arm in milliseconds, the difference of the
p50s and the median of the per-iteration differences. The target: at most
1 ms added at p50.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

import psycopg

from config.settings import Settings
from memory.audit import AuditLog
from memory.calls import CallMeta
from memory.commands import Command, CountMemories, GetMemory
from memory.deps import Deps
from memory.handlers import dispatch
from memory.providers.embedders import LocalEmbedder
from storage.embedded import start_embedded
from storage.migrate import migrate
from storage.pool import make_pool

DIMENSIONS = 384
#: Each tool's command class (the API's registry maps the names; benchmarks cannot import it).
COMMANDS: dict[str, type[Command]] = {"count_memories": CountMemories, "get_memory": GetMemory}
TOOLS: tuple[tuple[str, dict[str, Any] | None], ...] = (
    ("count_memories", {}),
    ("get_memory", None),
)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def _seed(dsn: str) -> tuple[int, int]:
    """An account with a few memories; (user id, one memory id)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE users, audit_events RESTART IDENTITY CASCADE")
        row = conn.execute(
            "INSERT INTO users (username, password_hash) VALUES ('bench', '!') RETURNING id"
        ).fetchone()
        assert row is not None
        user_id = int(row[0])
        memory_id = 0
        for n in range(20):
            text = f"Benchmark fact number {n}: the audit log costs little."
            found = conn.execute(
                "INSERT INTO memories (user_id, text, normalized_text, embedding,"
                " embedding_provider, embedding_model) VALUES"
                " (%s, %s, lower(%s), array_fill(0.1, ARRAY[%s])::vector, 'local', 'bench')"
                " RETURNING id",
                (user_id, text, text, DIMENSIONS),
            ).fetchone()
            assert found is not None
            memory_id = int(found[0])
    return user_id, memory_id


async def _time(
    deps: Deps, audit: AuditLog | None, user_id: int, tool: str, args: dict[str, Any]
) -> float:
    """One call as the dispatcher makes it: the use case, then (log on) its record."""
    started = time.perf_counter()
    command = COMMANDS[tool].parse(args, deps.settings)
    payload = await dispatch(deps, CallMeta(user_id), command)
    seconds = time.perf_counter() - started
    if audit is not None:
        audit.record(
            user_id=user_id,
            entry="mcp",
            client_id="bench",
            token_jti="bench",
            tool=tool,
            read_only=True,
            arguments=args,
            payload=payload,
            duration_s=seconds,
        )
    elapsed = time.perf_counter() - started
    assert payload.get("ok") is True, payload
    return elapsed


async def run(args: argparse.Namespace) -> dict[str, Any]:
    dsn = start_embedded(args.workdir, database="audit_bench")
    await migrate(dsn, dimensions=DIMENSIONS)
    user_id, memory_id = _seed(dsn)
    settings = Settings(database_url=dsn)
    embedder = LocalEmbedder.bundled()
    async with make_pool(dsn, min_size=2, max_size=4, name="bench-audit") as pool:
        deps = Deps(settings=settings, pool=pool, embedder=embedder)
        audit = AuditLog(pool, settings)
        arms: dict[str, AuditLog | None] = {"on": audit, "off": None}
        rng = random.Random(15)
        times: dict[str, dict[str, list[float]]] = {t: {"on": [], "off": []} for t, _ in TOOLS}
        for iteration in range(args.warmup + args.iterations):
            for tool, fixed in TOOLS:
                arguments = fixed if fixed is not None else {"id": memory_id}
                order = ["on", "off"]
                rng.shuffle(order)
                for arm in order:
                    elapsed = await _time(deps, arms[arm], user_id, tool, arguments)
                    if iteration >= args.warmup:
                        times[tool][arm].append(elapsed * 1000)
        await audit.close()
        async with pool.connection() as conn:
            cur = await conn.execute("SELECT count(*) FROM audit_events")
            row = await cur.fetchone()
            recorded = int(row[0]) if row else 0
    results: dict[str, Any] = {"iterations": args.iterations, "audit_records_written": recorded}
    for tool, arms_ms in times.items():
        on, off = arms_ms["on"], arms_ms["off"]
        results[tool] = {
            "on": {"p50": round(pct(on, 50), 3), "p95": round(pct(on, 95), 3)},
            "off": {"p50": round(pct(off, 50), 3), "p95": round(pct(off, 95), 3)},
            "p50_added_ms": round(pct(on, 50) - pct(off, 50), 3),
            "median_of_pair_differences_ms": round(
                statistics.median(a - b for a, b in zip(on, off, strict=True)), 3
            ),
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=5000, help="measured calls per arm")
    parser.add_argument("--warmup", type=int, default=300, help="unmeasured calls per arm first")
    parser.add_argument("--workdir", type=Path, default=Path(".bench/audit"))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    print(json.dumps(asyncio.run(run(args)), indent=2))


if __name__ == "__main__":
    main()
