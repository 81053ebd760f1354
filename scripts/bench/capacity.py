"""What one memory and one call cost a server: bytes on disk, CPU per recall and per write.

    python -m scripts.bench.capacity [--memories 3000] [--recalls 300] [--remembers 150]

Starts a real ``ownsona serve`` on the embedded default (the in-process worker:
one process does the web and the worker's part), fills one account with
``--memories`` synthetic facts through ``remember_batch`` (the local model embeds
them), and measures (docs/scaling.md reasons from these):

- bytes per memory: ``pg_total_relation_size('memories')`` (the table, its TOAST
  and every index) and the whole database, divided by the rows;
- CPU per ``recall`` and per ``remember`` (one text), summed over the server
  process and every PostgreSQL process, from ``/proc/<pid>/stat`` (user + system
  time) before and after the calls, one client calling back to back; with the
  wall-clock p50 beside it. CPU time, unlike wall time, hardly depends on what
  else runs on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import psycopg

from scripts.processes import child_pids, run_processes
from storage.embedded import start_embedded

from . import corpus
from .mcp_client import McpClient

_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) * _TICK_S  # utime, stime


def _postgres_pids(data_dir: Path) -> list[int]:
    main = int((data_dir / "pg" / "postmaster.pid").read_text().split()[0])
    return [main, *child_pids(main)]


def _cpu_of(pids: list[int]) -> float:
    return sum(_cpu_s(pid) for pid in pids)


def _timed_calls(
    client: McpClient,
    server_pid: int,
    postgres: list[int],
    calls: list[tuple[str, dict[str, object]]],
) -> dict[str, float]:
    """CPU per call of the server process and of PostgreSQL, and the wall-clock p50."""
    server_before, postgres_before, times = _cpu_s(server_pid), _cpu_of(postgres), []
    for tool, arguments in calls:
        started = time.perf_counter()
        client.call(tool, arguments)
        times.append(time.perf_counter() - started)
    server_cpu = _cpu_s(server_pid) - server_before
    postgres_cpu = _cpu_of(postgres) - postgres_before
    return {
        "calls": len(calls),
        "cpu_ms_per_call": round((server_cpu + postgres_cpu) / len(calls) * 1000, 2),
        "server_cpu_ms_per_call": round(server_cpu / len(calls) * 1000, 2),
        "postgres_cpu_ms_per_call": round(postgres_cpu / len(calls) * 1000, 2),
        "wall_p50_ms": round(statistics.median(times) * 1000, 2),
    }


def _sizes(dsn: str) -> dict[str, float]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*), pg_total_relation_size('memories'), pg_relation_size('memories'),"
            " pg_indexes_size('memories'), pg_database_size(current_database())"
            " FROM memories"
        ).fetchone()
        assert row is not None
        hnsw = conn.execute(
            "SELECT coalesce(sum(pg_relation_size(indexrelid)), 0) FROM pg_index"
            " JOIN pg_class c ON c.oid = indexrelid JOIN pg_am am ON am.oid = c.relam"
            " WHERE indrelid = 'memories'::regclass AND am.amname = 'hnsw'"
        ).fetchone()
        assert hnsw is not None
    rows, total, heap, indexes, database = (int(v) for v in row)
    return {
        "memories": rows,
        "bytes_per_memory_with_indexes": round(total / rows),
        "heap_bytes_per_memory": round(heap / rows),
        "index_bytes_per_memory": round(indexes / rows),
        "hnsw_bytes_per_memory": round(int(hnsw[0]) / rows),
        "database_bytes_per_memory": round(database / rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench.capacity")
    parser.add_argument("--memories", type=int, default=3000)
    parser.add_argument("--recalls", type=int, default=300)
    parser.add_argument("--remembers", type=int, default=150)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="ownsona-capacity-") as tmp,
        run_processes(Path(tmp)) as server,
    ):
        client = McpClient(server.url, server.token())
        facts = list(corpus.facts(args.memories + args.remembers, seed=29))
        started = time.perf_counter()
        for at in range(0, args.memories, 100):
            items = [{"text": t} for t in facts[at : min(at + 100, args.memories)]]
            client.call("remember_batch", {"items": items, "dedup_policy": "insert"})
        seeded_s = time.perf_counter() - started
        data_dir = Path(server.env["OWNSONA_DATA_DIR"])
        postgres = _postgres_pids(data_dir)
        questions = corpus.questions(args.recalls, seed=31)
        recall = _timed_calls(
            client,
            server.process.pid,
            postgres,
            [("recall", {"query": q, "limit": 8}) for q in questions],
        )
        remember = _timed_calls(
            client,
            server.process.pid,
            postgres,
            [("remember", {"text": t}) for t in facts[args.memories :]],
        )
        dsn = start_embedded(data_dir)
        report = {
            "seeding_items_per_s": round(args.memories / seeded_s, 1),
            "recall": recall,
            "remember": remember,
            **_sizes(dsn),
        }
        client.close()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
