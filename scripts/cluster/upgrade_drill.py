"""The upgrade phase of the drill: a cluster of the previous release upgraded under load.

The cluster (``topology``: PostgreSQL pair, Redis and Sentinels, two web
processes, two workers) starts with every OwnSona process running the
previous release, from a temporary git worktree of its commit. The drill's
clients write and read through both web processes (``clients``) while the
phase upgrades it in the supported order (docs/upgrading.md):

1. ``ownsona migrate`` of the new release, while the old processes serve;
2. each worker in turn stopped (SIGTERM: it finishes what it holds) and
   started again on the new release;
3. each web process in turn replaced the way a balancer does it: the new one
   is started on a new port and waited for until healthy, the clients' traffic
   for that slot goes to it, and only then is the old one stopped (SIGTERM).

``order=("webs", "workers")`` runs the other order, where the new web
processes meet workers of the previous release.

What the phase reports is the drill's (``drill.PhaseResult``): acknowledged
writes lost, ids reused, texts duplicated, HTTP 500s, hangs, errors by kind
(a failed ``remember`` is a write a user saw fail), plus the seconds each step
took. Run it with ``python -m scripts.cluster.upgrade_drill [--from COMMIT]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from scripts.processes import free_port, stop_process

from .clients import Log
from .drill import Drill, DrillConfig, PhaseResult, recovery_s
from .topology import WRITE_TIMEOUT_S, Cluster

#: The release this one upgrades from (the previous one; its messages are in
#: tests/fixtures/queue_messages/).
PREVIOUS_RELEASE = "6540e3c"
#: The phase's name and what it does, as the drill's report names them.
PHASE = "upgrade"
FAULT = "every process replaced one by one by the new release, under load"
#: Where this checkout is (the new release).
HERE = Path(__file__).resolve().parents[2]


@dataclass
class MixedCluster(Cluster):
    """A :class:`Cluster` whose processes each run from a given checkout (a release)."""

    #: The checkout of the previous release, that the processes named in ``old`` run from.
    previous: Path = field(default=HERE)
    old: set[str] = field(default_factory=set)
    #: The checkout of the new release (this one, unless a drill of two old releases).
    new: Path = field(default=HERE)

    def _env(self) -> dict[str, str]:
        env = super()._env()
        # The previous release knows no sealing at rest: the deployment it upgrades has no
        # master key, and is sealed only once every process runs the new release
        # (docs/upgrading.md). A release that cannot open sealed rows never runs beside one
        # that writes them.
        for name in ("OWNSONA_MASTER_KEY", "OWNSONA_MASTER_KEY_FILE", "OWNSONA_SEAL_MEMORIES"):
            env.pop(name, None)
        # Every release's settings must accept the environment: an older one may not know
        # the host-list DATABASE_URL (c098406), which the URL's query form says as well.
        if not all(_settings_accept(c, env) for c in {self.previous, self.new}):
            env["DATABASE_URL"] = self.pg.query_form_url()
            if self.features is not None:
                self.features.multi_host_url = False
        return env

    def _spawn(self, args: list[str], name: str, **extra: str) -> subprocess.Popen[bytes]:
        checkout = self.previous if name in self.old else self.new
        data_dir = self.root / name
        data_dir.mkdir(exist_ok=True)
        log = open(self.root / f"{name}.log", "a")  # noqa: SIM115 (the process's for its life)
        proc = subprocess.Popen(
            [sys.executable, "-m", "scripts.cli", *args],
            cwd=checkout,
            env={
                **self.env,
                "OWNSONA_DATA_DIR": str(data_dir),
                "PYTHONPATH": str(checkout),
                **extra,
            },
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        return proc

    def migrate_to_new(self, notes: list[str], attempts: int = 3) -> float:
        """``ownsona migrate`` of the new release (run again, as an operator would, if it
        fails; each failure noted); the seconds it took."""
        started = time.monotonic()
        for attempt in range(1, attempts + 1):
            done = subprocess.run(
                [sys.executable, "-m", "scripts.cli", "migrate"],
                cwd=self.new,
                env={**self.env, "PYTHONPATH": str(self.new)},
                capture_output=True,
                text=True,
            )
            if done.returncode == 0:
                break
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
            notes.append(f"ownsona migrate failed (run {attempt}): {last[0][:300]}")
        else:
            raise RuntimeError(f"ownsona migrate failed {attempts} times: {notes[-1]}")
        return time.monotonic() - started

    def replace_worker(self, n: int) -> float:
        started = time.monotonic()
        stop_process(self.worker_procs[n], timeout_s=WRITE_TIMEOUT_S + 30)
        self.old.discard(f"worker{n}")
        self.start_worker(n)
        return time.monotonic() - started

    def start_new_web(self, n: int) -> subprocess.Popen[bytes]:
        """Web slot ``n`` started on the new release on a new port; the old one keeps running."""
        old = self.webs[n]
        self.web_ports[n] = free_port()
        self.old.discard(f"web{n}")
        self.start_web(n)
        assert old is not None
        return old


def _settings_accept(checkout: Path, env: dict[str, str]) -> bool:
    """Whether the settings of the release at ``checkout`` accept ``env``."""
    check = "from config.settings import Settings; import os; Settings.from_env(dict(os.environ))"
    done = subprocess.run(
        [sys.executable, "-c", check],
        cwd=checkout,
        env={**env, "PYTHONPATH": str(checkout)},
        capture_output=True,
    )
    return done.returncode == 0


@contextmanager
def previous_checkout(commit: str, *, workdir: Path | None = None) -> Iterator[Path]:
    """A detached git worktree of ``commit`` (removed afterwards)."""
    path = Path(tempfile.mkdtemp(prefix=f"ownsona-release-{commit}-", dir=workdir))
    path.rmdir()
    subprocess.run(
        ["git", "-C", str(HERE), "worktree", "add", "--detach", str(path), commit],
        check=True,
        capture_output=True,
    )
    try:
        yield path
    finally:
        subprocess.run(
            ["git", "-C", str(HERE), "worktree", "remove", "--force", str(path)],
            check=False,
            capture_output=True,
        )


@contextmanager
def running_previous_release(
    commit: str = PREVIOUS_RELEASE,
    mode: str = "sync",
    *,
    to: str | None = None,
    keep: bool = False,
) -> Iterator[MixedCluster]:
    """A started cluster whose every OwnSona process runs ``commit``, to upgrade to ``to``.

    ``to`` None: this checkout; a commit: a worktree of it (to replay an
    upgrade between two earlier releases, as the issue measured it).
    """
    with previous_checkout(commit) as checkout, _checkout_of(to) as new:
        root = Path(tempfile.mkdtemp(prefix="ownsona-upgrade-"))
        os.chmod(root, 0o755)
        names = {"web0", "web1", "worker0", "worker1"}
        cluster = MixedCluster(root, mode, 0.0, previous=checkout, old=set(names), new=new)
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()
            if not keep:
                shutil.rmtree(root, ignore_errors=True)


@contextmanager
def _checkout_of(commit: str | None) -> Iterator[Path]:
    if commit is None:
        yield HERE
        return
    with previous_checkout(commit) as path:
        yield path


class UpgradeDrill(Drill):
    """The drill's clients and checks around one phase: the upgrade."""

    cluster: MixedCluster
    #: The clients of replaced web processes, closed once the phase is over.
    _retired: list[httpx.AsyncClient]

    async def upgrade(self, order: tuple[str, ...] = ("workers", "webs")) -> PhaseResult:
        config, log = self.config, Log()
        self._retired = []
        result = PhaseResult(PHASE, f"{FAULT} ({' then '.join(order)})")
        stop = asyncio.Event()
        hard_stop = time.monotonic() + config.warm_s + config.recover_timeout_s + config.settle_s
        tasks = [asyncio.create_task(c.run(log, stop, hard_stop)) for c in self.clients]
        try:
            await asyncio.sleep(config.warm_s)
            started = time.monotonic()
            result.timings["migrate_s"] = await asyncio.to_thread(
                self.cluster.migrate_to_new, result.notes
            )
            for step in order:
                if step == "workers":
                    for n in range(len(self.cluster.worker_procs)):
                        result.timings[f"worker{n}_replaced_s"] = await asyncio.to_thread(
                            self.cluster.replace_worker, n
                        )
                else:
                    for n in range(len(self.cluster.webs)):
                        result.timings[f"web{n}_replaced_s"] = await self._replace_web(n)
            result.timings["upgrade_s"] = time.monotonic() - started
            await asyncio.sleep(config.settle_s)
        finally:
            stop.set()
            await asyncio.wait(tasks, timeout=hard_stop - time.monotonic() + WRITE_TIMEOUT_S + 20)
            for client in self.clients:
                await client.close()
        for task in tasks:
            if task.done() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        result.recovery_s = [recovery_s(log, w, started) for w in range(len(self.cluster.urls))]
        self._tally(result, log, started)
        for retired in self._retired:
            await retired.aclose()
        await self._reopen_clients()
        try:
            await self._verify(result, log, started)
        finally:
            for client in self.clients:
                await client.close()
        return result

    async def _replace_web(self, n: int) -> float:
        """Start the new web process, send slot ``n``'s traffic to it, then stop the old one."""
        started = time.monotonic()
        old = await asyncio.to_thread(self.cluster.start_new_web, n)
        url = self.cluster.urls[n]
        for client in self.clients:
            previous = client.http[n]
            client.http[n] = httpx.AsyncClient(
                base_url=url,
                headers=dict(previous.headers),
                timeout=previous.timeout,
                limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            )
            # A call in flight on the old client finishes there (the old process drains).
            self._retired.append(previous)
        await asyncio.to_thread(stop_process, old, WRITE_TIMEOUT_S + 30)
        return time.monotonic() - started

    async def _reopen_clients(self) -> None:
        for client in self.clients:
            for n, previous in enumerate(client.http):
                client.http[n] = httpx.AsyncClient(
                    base_url=self.cluster.urls[n],
                    headers=dict(previous.headers),
                    timeout=previous.timeout,
                )


def writes_failed(result: PhaseResult) -> int:
    """Writes a user saw fail (the clients retried them with the same key)."""
    return sum(n for kind, n in result.errors.items() if kind.startswith("remember:"))


def main() -> None:
    parser = argparse.ArgumentParser(description="The upgrade phase of the drill, under load.")
    parser.add_argument("--from", dest="commit", default=PREVIOUS_RELEASE)
    parser.add_argument(
        "--to", default=None, help="a commit to upgrade to (default: this checkout)"
    )
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--warm", type=float, default=5.0)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--order", choices=("workers-first", "webs-first"), default="workers-first")
    args = parser.parse_args()
    order = ("workers", "webs") if args.order == "workers-first" else ("webs", "workers")
    config = DrillConfig(
        clients=args.clients, warm_s=args.warm, settle_s=args.settle, recover_timeout_s=600
    )
    with running_previous_release(args.commit, to=args.to) as cluster:
        drill = UpgradeDrill(cluster, config, cluster.tokens(config.clients))
        result = asyncio.run(drill.upgrade(order))
    report = {**result.as_dict(), "writes_failed": writes_failed(result)}
    print(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
