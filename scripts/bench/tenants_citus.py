"""The tenants benchmark's ``tenants`` database on a Citus cluster (issue 32).

With ``python -m scripts.bench.tenants --citus`` the ``tenants`` database lives on a
coordinator and two workers (``scripts.cluster.citus_nodes``, from the cached build
of the vendored Citus, under ``<workdir>/citus``); the baselines (``lone_*``) stay on
the one embedded node, so the ratios compare a tenant on Citus with a user alone on
one node. ``ownsona migrate``'s code places the tables (``storage.citus_layout``), and
the server under test is the same ``ownsona serve`` with ``DATABASE_URL`` naming the
coordinator.

The cluster is made afresh on every run (its nodes' ports are picked per run, and the
coordinator's node list names them), so the ``tenants`` database is seeded again each
time; the baselines on the single node are still reused.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from scripts.cluster.citus_build import ensure_built
from scripts.cluster.citus_nodes import CitusCluster
from storage import terms

#: Run before each index build on Citus, in the build's transaction. Citus runs a
#: distributed ``CREATE INDEX`` on every shard from the workers' own sessions: plain
#: ``SET`` stays on the coordinator, ``SET LOCAL`` is forwarded
#: (``citus.propagate_set_commands``). One connection per worker
#: (``citus.max_adaptive_executor_pool_size``) keeps to one shard build per worker at a
#: time, so the two builds on this machine's two cores do not also share memory with
#: the shards' other builds; each gets 1 GB (a shard holds a quarter of the rows).
CITUS_INDEX_BUILD = (
    "SET citus.propagate_set_commands = 'local'",
    "SET LOCAL maintenance_work_mem = '1GB'",
    "SET LOCAL max_parallel_maintenance_workers = 1",
    "SET LOCAL citus.max_adaptive_executor_pool_size = 1",
)


def count_terms_if_missing(dsn: str, user_ids: Sequence[int]) -> None:
    """Count each user's term statistics from their rows when ``COPY`` left none.

    On one node the previous release's triggers still count what ``COPY`` inserts
    (migration 0021 keeps them for it); on Citus the layout has dropped them, and the
    statistics live in the write statements ``COPY`` bypasses. Without them a seeded
    store would answer recall without its lexical statistics (and no user would
    qualify for an own index), unlike the baselines. One user at a time
    (``storage.terms.recount``, each statement on the user's shard).
    """
    with psycopg.connect(dsn) as conn:
        counted = conn.execute("SELECT count(*) FROM memory_term_totals").fetchone()
    if counted is not None and counted[0] > 0:
        return
    started = time.perf_counter()

    async def run() -> None:
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            for user_id in user_ids:
                await terms.recount(conn, user_id)
                await conn.commit()

    asyncio.run(run())
    print(
        f"term statistics counted for {len(user_ids)} users"
        f" in {time.perf_counter() - started:.0f} s",
        flush=True,
    )


@contextmanager
def tenants_on_citus(workdir: Path, database: str) -> Iterator[tuple[CitusCluster, str]]:
    """A fresh cluster under ``workdir / "citus"`` with ``database`` created on every node
    (Citus and pgvector in it, the workers added); the cluster and the coordinator's URL.
    The cluster is stopped on the way out."""
    root = workdir / "citus"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    root.chmod(0o755)  # as root the nodes run as the wheel's user
    cluster = CitusCluster(root, ensure_built())
    try:
        cluster.start()
        yield cluster, cluster.create_database(database)
    finally:
        cluster.stop()


def _shard_sizes(dsn: str) -> dict[str, int]:
    """Bytes of each of ``memories``' shard relations on one worker, summed per logical
    name (the table, its TOAST and each index; ``<name>_<shardid>`` -> ``<name>``)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET citus.override_table_visibility = off")  # shards are hidden
        rows = conn.execute(
            "SELECT regexp_replace(c.relname, '_[0-9]+$', ''), c.relkind,"
            " pg_relation_size(c.oid), pg_table_size(c.oid)"
            " FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace"
            " AND (c.relname ~ '^memories_[0-9]+$'"
            "  OR c.oid IN (SELECT indexrelid FROM pg_index x JOIN pg_class t"
            "   ON t.oid = x.indrelid WHERE t.relname ~ '^memories_[0-9]+$'))"
        ).fetchall()
    sizes: dict[str, int] = {}
    for name, kind, relation, table in rows:
        key = "heap_and_toast" if kind == "r" else name
        sizes[key] = sizes.get(key, 0) + int(table if kind == "r" else relation)
    return sizes


def disk_per_memory_on_citus(cluster: CitusCluster, dsn: str) -> dict[str, Any]:
    """``tenants.disk_per_memory``'s figures, read from the workers' shards (the
    coordinator's ``memories`` is an empty shell); the database size summed over nodes."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT count(*) FROM memories").fetchone()[0]  # type: ignore[index]
    total: dict[str, int] = {}
    for worker in cluster.workers:
        for name, size in _shard_sizes(worker.dsn(cluster_database(dsn))).items():
            total[name] = total.get(name, 0) + size
    database = 0
    for node in cluster.nodes:
        with psycopg.connect(node.dsn(cluster_database(dsn))) as conn:
            database += conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]  # type: ignore[index]
    heap = total.pop("heap_and_toast", 0)
    indexes = sorted(total.items(), key=lambda item: -item[1])
    return {
        "rows": rows,
        "bytes_per_memory": {
            "memories_total": round((heap + sum(total.values())) / rows),
            "heap_and_toast": round(heap / rows),
            **{name: round(size / rows) for name, size in indexes},
        },
        "database_gb": round(database / 2**30, 2),
        "nodes": len(cluster.nodes),
    }


def cluster_database(dsn: str) -> str:
    return str(psycopg.conninfo.conninfo_to_dict(dsn)["dbname"])
