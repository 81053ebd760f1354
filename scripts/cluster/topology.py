"""The whole drill cluster: PostgreSQL pair, Redis group, two web processes, two workers.

Every process is a real ``python -m scripts.cli serve`` or ``worker`` with the
production settings of issue 29: ``DATABASE_URL`` naming both PostgreSQL nodes
(``target_session_attrs=read-write``), ``DATABASE_REPLICA_URLS`` naming the
standby, ``REDIS_SENTINELS`` with ``REDIS_SENTINEL_MASTER``. What this build's
settings do not know yet is recorded in :class:`Features` and worked around
the way an operator would today (the ``?host=..&port=..`` URL form, ``REDIS_URL``
at the master), so the drill runs on any build and says what it ran.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from config.settings import Settings, SettingsError
from scripts.processes import free_port, stop_process, wait_until_healthy

from .postgres_nodes import PgPair
from .redis_nodes import MASTER_NAME, RedisGroup

#: Seconds a queued write waits for its worker before answering (WRITE_TIMEOUT).
WRITE_TIMEOUT_S = 15
#: What ``ownsona worker`` prints once it consumes.
WORKER_READY = "OwnSona worker running"
#: The password of every drill account (only ever on loopback).
PASSWORD = "drill-password-not-secret"


@dataclass
class Features:
    """Which of issue 29's settings this build knows (the rest is worked around)."""

    multi_host_url: bool
    replicas: bool
    sentinels: bool

    def notes(self) -> list[str]:
        notes = []
        if not self.multi_host_url:
            notes.append(
                "DATABASE_URL host-list form refused by the settings check: "
                "the ?host=..&port=.. form used instead"
            )
        if not self.replicas:
            notes.append("DATABASE_REPLICA_URLS unknown to this build: every read on the primary")
        if not self.sentinels:
            notes.append(
                "REDIS_SENTINELS unknown to this build: processes given REDIS_URL at the first master"
            )
        return notes


def _setting_names() -> set[str]:
    return {f.name for f in dataclasses.fields(Settings)}


def _accepts(env: dict[str, str]) -> bool:
    try:
        Settings.from_env(env)
    except SettingsError:
        return False
    return True


@dataclass
class Cluster:
    root: Path
    mode: str
    lag_s: float
    workers: int = 2
    pg: PgPair = field(init=False)
    redis: RedisGroup = field(init=False)
    web_ports: list[int] = field(default_factory=lambda: [free_port(), free_port()])
    webs: list[subprocess.Popen[bytes] | None] = field(default_factory=lambda: [None, None])
    worker_procs: list[subprocess.Popen[bytes] | None] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    features: Features | None = None

    def __post_init__(self) -> None:
        self.pg = PgPair(self.root / "pg", self.mode, self.lag_s)
        self.redis = RedisGroup(self.root / "redis")
        self.worker_procs = [None] * self.workers

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}" for port in self.web_ports]

    # -- start ---------------------------------------------------------------

    def start(self) -> None:
        (self.root / "pg").mkdir()
        os.chmod(self.root / "pg", 0o755)  # the PostgreSQL user reaches its directories
        with ThreadPoolExecutor(2) as pool:
            for started in [pool.submit(self.pg.start), pool.submit(self.redis.start)]:
                started.result()
        self.env = self._env()
        # Both migrate at start, one at a time under the migration lock; the workers only
        # check the schema, so they start once a web process has migrated it.
        self.webs = [self._spawn_web(0), self._spawn_web(1)]
        self._wait_web(0)
        self._wait_web(1)
        with ThreadPoolExecutor(self.workers) as pool:
            list(pool.map(self.start_worker, range(self.workers)))

    def _env(self) -> dict[str, str]:
        names = _setting_names()
        base = {
            k: v
            for k, v in os.environ.items()
            if k not in ("DATABASE_URL", "REDIS_URL", "OWNSONA_PUBLIC_URL", "PORT")
        }
        base.update(
            # One public URL for both: tokens name it as their audience, as behind a balancer.
            OWNSONA_PUBLIC_URL=self.urls[0],
            OWNSONA_LOGIN_USERNAME="drill",
            OWNSONA_LOGIN_PASSWORD=PASSWORD,
            WRITE_TIMEOUT=str(WRITE_TIMEOUT_S),
            QUEUE_HEARTBEAT_TIMEOUT="5000",
            LOG_FORMAT="text",
            DATABASE_REPLICA_URLS=self.pg.standby_url(),
            REPLICA_MAX_LAG_S="5",
        )
        multi_host = _accepts({**base, "DATABASE_URL": self.pg.multi_host_url()})
        base["DATABASE_URL"] = self.pg.multi_host_url() if multi_host else self.pg.query_form_url()
        sentinels = any("sentinel" in name for name in names)
        # With REDIS_SENTINELS, REDIS_URL still gives the database number (its address is
        # then unused); without, it is all the processes have: the first master.
        base["REDIS_URL"] = f"redis://127.0.0.1:{self.redis.master_port()}/0"
        if sentinels:
            base.update(REDIS_SENTINELS=self.redis.sentinel_list, REDIS_SENTINEL_MASTER=MASTER_NAME)
        self.features = Features(
            multi_host_url=multi_host,
            replicas=any("replica" in name for name in names),
            sentinels=sentinels,
        )
        return base

    def _spawn(self, args: list[str], name: str, **extra: str) -> subprocess.Popen[bytes]:
        data_dir = self.root / name
        data_dir.mkdir(exist_ok=True)
        log = open(self.root / f"{name}.log", "a")  # noqa: SIM115 (the process's for its life)
        proc = subprocess.Popen(
            [sys.executable, "-m", "scripts.cli", *args],
            env={**self.env, "OWNSONA_DATA_DIR": str(data_dir), **extra},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        return proc

    def start_web(self, n: int) -> None:
        self.webs[n] = self._spawn_web(n)
        self._wait_web(n)

    def _spawn_web(self, n: int) -> subprocess.Popen[bytes]:
        return self._spawn(["serve"], f"web{n}", PORT=str(self.web_ports[n]))

    def _wait_web(self, n: int) -> None:
        proc = self.webs[n]
        assert proc is not None
        problem = wait_until_healthy(self.urls[n], proc, timeout_s=180)
        if problem is not None:
            raise RuntimeError(f"web{n} {problem}; its log ends:\n{_tail(self.log(f'web{n}'))}")

    def start_worker(self, n: int, *, wait: bool = True) -> None:
        """Start worker ``n``; with ``wait``, until it consumes (its start-up line in its log)."""
        name = f"worker{n}"
        starts = self.log(name).count(WORKER_READY)
        proc = self._spawn(["worker", "--threads", "2"], name)
        self.worker_procs[n] = proc
        if not wait:
            return
        deadline = time.monotonic() + 180
        while self.log(name).count(WORKER_READY) == starts:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start; its log ends:\n{_tail(self.log(name))}")
            time.sleep(0.2)

    # -- faults --------------------------------------------------------------

    def kill_web(self, n: int) -> None:
        _kill(self.webs[n])

    def kill_worker(self, n: int) -> None:
        _kill(self.worker_procs[n])

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # -- accounts ------------------------------------------------------------

    def tokens(self, users: int) -> list[str]:
        """One account per client (``drill1``..), each with a day-long token."""
        return asyncio.run(self._tokens(users))

    async def _tokens(self, users: int) -> list[str]:
        from auth.accounts import add_user
        from auth.cli_tokens import mint_cli_token
        from bootstrap.admin import admin_pool

        settings = Settings.from_env(self.env)
        tokens = []
        async with admin_pool(settings, dsn=self.pg.primary.dsn()) as pool:
            for n in range(1, users + 1):
                await add_user(pool, f"drill{n}", PASSWORD)
                tokens.append(
                    await mint_cli_token(
                        pool,
                        settings,
                        username=f"drill{n}",
                        scope="memory:read memory:write",
                        ttl_s=86400,
                        label="drill",
                    )
                )
        return tokens

    # -- stop ----------------------------------------------------------------

    def stop(self) -> None:
        for proc in [*self.worker_procs, *self.webs]:
            stop_process(proc)
        self.redis.stop()
        self.pg.stop()


def _tail(text: str, lines: int = 30) -> str:
    """The end of a process's log, for an error raised after its directory is gone."""
    return "\n".join(text.splitlines()[-lines:])


def _kill(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


@contextmanager
def running_cluster(
    mode: str, lag_s: float = 0.0, *, workdir: Path | None = None, keep: bool = False
) -> Iterator[Cluster]:
    """A started :class:`Cluster` in a temporary directory; every process stopped, dir removed."""
    root = Path(tempfile.mkdtemp(prefix="ownsona-drill-", dir=workdir))
    os.chmod(root, 0o755)
    cluster = Cluster(root, mode, lag_s)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
