"""A Redis master, its replica and Sentinels as real local processes (tests and the drill).

Debian's ``redis-server`` plays every part (``redis-server --sentinel`` for
a Sentinel), each on a free loopback port with its own directory. The
Sentinels watch the master under :data:`MASTER_NAME` with a short
``down-after-milliseconds``, so a killed master is replaced within seconds.
Every wait polls with a deadline; nothing sleeps a fixed time.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

from scripts.processes import free_port, kill_process, stop_process

#: The name the Sentinels know the master by (REDIS_SENTINEL_MASTER).
MASTER_NAME = "ownsona-test"
#: A master silent this long is subjectively down (Sentinel's down-after-milliseconds).
DOWN_AFTER_MS = 1000
#: Sentinel's failover-timeout: also how long before a failed failover is tried again.
FAILOVER_TIMEOUT_MS = 3000


@dataclass
class RedisNode:
    """One ``redis-server`` process (a data node or a Sentinel)."""

    port: int
    config: Path
    log: Path
    sentinel: bool = False
    #: A data node's requirepass (Sentinels here have none).
    password: str | None = None
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        args = ["redis-server", str(self.config)]
        if self.sentinel:
            args.append("--sentinel")
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _until(lambda: self._answers(), 20, f"redis-server on {self.address} did not start")

    def kill(self) -> None:
        """SIGKILL: the machine dies; nothing is flushed or handed over."""
        kill_process(self.process)
        self.process = None

    def stop(self) -> None:
        stop_process(self.process, timeout_s=10)
        self.process = None

    def client(self) -> redis.Redis:
        return redis.Redis(
            host="127.0.0.1", port=self.port, password=self.password, socket_timeout=2
        )

    def role(self) -> str:
        with self.client() as client:
            role = client.execute_command("ROLE")
        kind = role[0]
        return kind.decode() if isinstance(kind, bytes) else str(kind)

    def _answers(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"redis-server on {self.address} exited; see {self.log}")
        try:
            with self.client() as client:
                return bool(client.ping())
        except redis.RedisError:
            return False


def start_standalone(workdir: Path) -> RedisNode:
    """One plain ``redis-server`` (no replica, no Sentinel), started, in ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = workdir / "standalone.conf"
    log = workdir / "standalone.log"
    lines = ["bind 127.0.0.1", f"port {port}", f"dir {workdir}", 'save ""', f"logfile {log}"]
    config.write_text("\n".join([*lines, ""]))
    node = RedisNode(port=port, config=config, log=log)
    node.start()
    return node


@dataclass
class RedisTopology:
    """A master, a replica and ``sentinels`` Sentinels in ``workdir``; :meth:`start` runs them."""

    workdir: Path
    sentinel_count: int = 3
    password: str | None = None
    nodes: list[RedisNode] = field(default_factory=list)
    sentinels: list[RedisNode] = field(default_factory=list)

    @property
    def sentinel_setting(self) -> str:
        """REDIS_SENTINELS for these Sentinels."""
        return ",".join(node.address for node in self.sentinels)

    def redis_url(self, node: RedisNode, db: int = 0) -> str:
        """REDIS_URL naming ``node`` directly (with the password, if any)."""
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}{node.address}/{db}"

    def start(self) -> RedisTopology:
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is not installed")
        self.workdir.mkdir(parents=True, exist_ok=True)
        master = self._data_node("node-a", replica_of=None)
        master.start()
        replica = self._data_node("node-b", replica_of=master)
        replica.start()
        self.nodes = [master, replica]
        _until(lambda: self._in_sync(master), 20, "the replica did not catch up with the master")
        for i in range(self.sentinel_count):
            sentinel = self._sentinel_node(f"sentinel-{i}", master)
            sentinel.start()
            self.sentinels.append(sentinel)
        _until(self._sentinels_agree, 30, "the Sentinels did not find each other and the replica")
        return self

    def master(self) -> RedisNode:
        """The node the Sentinels currently name as master."""
        host_port = self._sentinel_view()
        if host_port is None:
            raise RuntimeError("no Sentinel names a master")
        for node in self.nodes:
            if node.port == host_port[1]:
                return node
        raise RuntimeError(f"the Sentinels name an unknown master {host_port}")

    def replica(self) -> RedisNode:
        master = self.master()
        return next(node for node in self.nodes if node is not master)

    def wait_for_new_master(self, old: RedisNode, timeout_s: float = 30) -> RedisNode:
        """Until every Sentinel names another node as master, and that node says so itself."""

        def switched() -> bool:
            views = {self._view_of(s) for s in self.sentinels if s.process is not None}
            if len(views) != 1:
                return False
            (view,) = views
            if view is None or view[1] == old.port:
                return False
            new = next(node for node in self.nodes if node.port == view[1])
            return new.role() == "master"

        _until(switched, timeout_s, "the Sentinels did not promote the replica")
        return self.master()

    def failover(self, timeout_s: float = 30) -> RedisNode:
        """``SENTINEL FAILOVER``: a coordinated switch; the old master becomes a replica."""
        old = self.master()

        def started() -> bool:
            # A Sentinel refuses (NOGOODSLAVE, INPROG) until it has seen the replica
            # healthy for a while, e.g. just after it came back: asked again until then.
            try:
                with self.sentinels[0].client() as client:
                    client.execute_command("SENTINEL", "FAILOVER", MASTER_NAME)
            except redis.ResponseError:
                return False
            return True

        _until(started, timeout_s, "no Sentinel would start a failover")
        new = self.wait_for_new_master(old, timeout_s)
        _until(lambda: old.role() == "slave", timeout_s, "the old master did not become a replica")
        return new

    def restart(self, node: RedisNode) -> None:
        """Start a killed node again (the Sentinels turn an old master into a replica)."""
        node.start()

    def wait_until_replica(self, node: RedisNode, timeout_s: float = 30) -> None:
        _until(
            lambda: node.role() == "slave", timeout_s, f"{node.address} did not become a replica"
        )

    def stop(self) -> None:
        for node in [*self.sentinels, *self.nodes]:
            node.stop()

    # -- building the nodes ---------------------------------------------------------------

    def _data_node(self, name: str, replica_of: RedisNode | None) -> RedisNode:
        lines = ['save ""', "appendonly no"]
        if self.password:
            lines += [f"requirepass {self.password}", f"masterauth {self.password}"]
        if replica_of is not None:
            lines.append(f"replicaof 127.0.0.1 {replica_of.port}")
        node = self._node(name, lines, sentinel=False)
        node.password = self.password
        return node

    def _sentinel_node(self, name: str, master: RedisNode) -> RedisNode:
        lines = [
            f"sentinel monitor {MASTER_NAME} 127.0.0.1 {master.port} 2",
            f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}",
            f"sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}",
            f"sentinel parallel-syncs {MASTER_NAME} 1",
        ]
        if self.password:
            lines.append(f"sentinel auth-pass {MASTER_NAME} {self.password}")
        return self._node(name, lines, sentinel=True)

    def _node(self, name: str, lines: list[str], *, sentinel: bool) -> RedisNode:
        """A node on a free loopback port, in its own directory, with ``lines`` of config."""
        port = free_port()
        directory = self.workdir / name
        directory.mkdir(exist_ok=True)
        config = self.workdir / f"{name}.conf"
        log = self.workdir / f"{name}.log"
        own = ["bind 127.0.0.1", f"port {port}", f"dir {directory}", "protected-mode no"]
        config.write_text("\n".join([*own, *lines, f"logfile {log}", ""]))
        return RedisNode(port=port, config=config, log=log, sentinel=sentinel)

    # -- what the Sentinels see -------------------------------------------------------------

    def _view_of(self, sentinel: RedisNode) -> tuple[str, int] | None:
        try:
            with sentinel.client() as client:
                found = client.sentinel_get_master_addr_by_name(MASTER_NAME)
        except redis.RedisError:
            return None
        if not found:
            return None
        host, port = found
        return (host.decode() if isinstance(host, bytes) else str(host), int(port))

    def _sentinel_view(self) -> tuple[str, int] | None:
        for sentinel in self.sentinels:
            if sentinel.process is not None:
                view = self._view_of(sentinel)
                if view is not None:
                    return view
        return None

    def _sentinels_agree(self) -> bool:
        for sentinel in self.sentinels:
            try:
                with sentinel.client() as client:
                    state = client.sentinel_master(MASTER_NAME)
            except redis.RedisError:
                return False
            if int(state.get("num-other-sentinels", 0)) < len(self.sentinels) - 1:
                return False
            if int(state.get("num-slaves", 0)) < 1:
                return False
        return True

    def _in_sync(self, master: RedisNode) -> bool:
        with master.client() as client:
            info = client.info("replication")
        return int(info.get("connected_slaves", 0)) >= 1 and "slave0" in info


def _until(check: Callable[[], bool], timeout_s: float, failure: str) -> None:
    """Poll ``check()`` until true, or raise RuntimeError(``failure``) after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.02)
    raise RuntimeError(failure)
