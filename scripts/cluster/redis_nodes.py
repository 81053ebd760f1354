"""A Redis master, its replica and three Sentinels on loopback (Debian's ``redis-server``).

The Sentinels watch the master under :data:`MASTER_NAME` with a quorum of 2
and call it down after one second of silence, so a killed master is replaced
by its replica within a few seconds. A killed master restarted on its old port
comes back with no ``replicaof``; the Sentinels then turn it into a replica of
the new master, as they would a machine that returns.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

from scripts.processes import free_port, kill_process, stop_process

MASTER_NAME = "ownsona"
#: Milliseconds of silence before a Sentinel calls the master down.
DOWN_AFTER_MS = 1000


def redis_server_available() -> bool:
    return shutil.which("redis-server") is not None


@dataclass
class RedisNode:
    name: str
    root: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    def start(self, *extra: str) -> None:
        directory = self.root / self.name
        directory.mkdir(parents=True, exist_ok=True)
        log = open(directory / "log", "a")  # noqa: SIM115 (the server's for its life)
        # No snapshot and no append-only file: a killed master loses what it had not
        # replicated, the worst case for a queue.
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
            + ["--dir", str(directory), "--save", "", "--appendonly", "no", *extra],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self._wait_up()

    def _wait_up(self) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                redis.Redis(port=self.port, socket_timeout=1).ping()
                return
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis {self.name} did not come up") from None
                time.sleep(0.05)

    def kill(self) -> None:
        kill_process(self.process)

    def stop(self) -> None:
        stop_process(self.process, timeout_s=10)


@dataclass
class Sentinel(RedisNode):
    def start_watching(self, master_port: int) -> None:
        directory = self.root / self.name
        directory.mkdir(parents=True, exist_ok=True)
        conf = directory / "sentinel.conf"  # a Sentinel rewrites its own file
        conf.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {directory}\n"
            f"sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} 2\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER_NAME} 5000\n"
            f"sentinel parallel-syncs {MASTER_NAME} 1\n"
        )
        log = open(directory / "log", "a")  # noqa: SIM115
        self.process = subprocess.Popen(
            ["redis-server", str(conf), "--sentinel"], stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        self._wait_up()


@dataclass
class RedisGroup:
    root: Path
    master: RedisNode | None = None
    replica: RedisNode | None = None
    sentinels: list[Sentinel] = field(default_factory=list)

    def start(self) -> None:
        self.master = RedisNode("redis1", self.root)
        self.master.start()
        self.replica = RedisNode("redis2", self.root)
        self.replica.start("--replicaof", "127.0.0.1", str(self.master.port))
        for n in range(3):
            sentinel = Sentinel(f"sentinel{n + 1}", self.root)
            sentinel.start_watching(self.master.port)
            self.sentinels.append(sentinel)
        self._wait(lambda: self.replica_link_up() and self.sentinels_agree(self.master_port()))

    @property
    def sentinel_list(self) -> str:
        """``REDIS_SENTINELS``: host:port, comma-separated."""
        return ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)

    def master_port(self) -> int:
        assert self.master is not None
        return self.master.port

    def replica_link_up(self) -> bool:
        assert self.replica is not None
        info = redis.Redis(port=self.replica.port, socket_timeout=1).info("replication")
        return info.get("master_link_status") == "up"

    def announced_master(self, sentinel: Sentinel) -> int | None:
        try:
            client = redis.Redis(port=sentinel.port, socket_timeout=1)
            answer = client.execute_command(  # type: ignore[no-untyped-call]  # redis-py leaves this unannotated
                "SENTINEL", "get-master-addr-by-name", MASTER_NAME
            )
        except redis.RedisError:
            return None
        return int(answer[1]) if answer else None

    def sentinels_agree(self, port: int) -> bool:
        return all(self.announced_master(s) == port for s in self.sentinels)

    def _wait(self, done: Callable[[], bool], timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis group did not settle")
            time.sleep(0.1)

    def kill_master_and_fail_over(self, timeout_s: float = 60) -> float:
        """SIGKILL the master; wait until every Sentinel names the replica. Seconds it took."""
        assert self.master is not None and self.replica is not None
        started = time.monotonic()
        self.master.kill()
        new_port = self.replica.port
        self._wait(lambda: self.sentinels_agree(new_port), timeout_s)
        took = time.monotonic() - started
        self.master, self.replica = self.replica, self.master
        return took

    def set_down_after(self, ms: int) -> None:
        """``SENTINEL SET ... down-after-milliseconds`` on every Sentinel (a brief freeze
        of the master is played without a failover by raising it for the while)."""
        for sentinel in self.sentinels:
            with redis.Redis(port=sentinel.port, socket_timeout=2) as client:
                client.execute_command(
                    "SENTINEL", "SET", MASTER_NAME, "down-after-milliseconds", str(ms)
                )

    def freeze_master_through_failover(
        self, hold_s: float, timeout_s: float = 60
    ) -> tuple[float, float, float, float]:
        """SIGSTOP the master; wait until every Sentinel names the replica, then ``hold_s``
        more; SIGCONT. The old master resumes believing it is master (split brain) until
        the Sentinels demote it; returns once it replicates: when it was frozen, when
        every Sentinel named the replica, when it was thawed (``time.monotonic()``), and
        the seconds it was frozen."""
        assert self.master is not None and self.replica is not None
        frozen = self.master.process
        assert frozen is not None
        started = time.monotonic()
        frozen.send_signal(signal.SIGSTOP)
        try:
            new_port = self.replica.port
            self._wait(lambda: self.sentinels_agree(new_port), timeout_s)
            failed_over_at = time.monotonic()
            time.sleep(hold_s)
        finally:
            frozen.send_signal(signal.SIGCONT)
        thawed_at = time.monotonic()
        self.master, self.replica = self.replica, self.master
        self._wait(lambda: self.replica_link_up(), 120)
        return started, failed_over_at, thawed_at, thawed_at - started

    def restart_old_master(self) -> None:
        """The dead master's machine returns (no ``replicaof``); the Sentinels demote it.

        Returns once it replicates from the new master.
        """
        assert self.replica is not None
        self.replica.start()
        # Usually 15-20 s (a Sentinel waits before converting a returning master); a
        # Sentinel in TILT mode (its timer late by 2 s, as on a swamped machine) does
        # nothing for 30 s more.
        self._wait(lambda: self.replica_link_up(), 120)

    def stop(self) -> None:
        for node in [*self.sentinels, self.replica, self.master]:
            if node is not None:
                node.stop()
