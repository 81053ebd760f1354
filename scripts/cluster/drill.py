"""The drill's phases: clients write and read while one node dies; what each phase cost.

Each phase runs the clients for ``warm_s``, injects its fault (the drill plays
the failover manager and the process supervisor), waits until writes succeed
again through every web process (at most ``recover_timeout_s`` after the
fault), lets the clients run ``settle_s`` more, stops them, and checks every
write acknowledged so far against each account's ``export_memories``:

- lost: an acknowledged id missing, or holding another text;
- reused: an acknowledged id handed out again for another text, or found
  holding another text (a client keeping the old id now addresses another memory);
- duplicated: one text stored under two ids;
- read-your-writes violations: ``get_memory`` through the other web process,
  right after the acknowledgement, did not find the write;
- HTTP 500s, hangs (a call outliving the client's timeout), errors by kind;
- seconds from the fault until writes succeed again through each web process
  (the end of the first acknowledged write after the last failed one); for a
  frozen node, also from its thaw;
- writes answered "nothing was stored" (a client that believes it writes again
  under a new key, so a false answer shows as a duplicate: counted apart);
- p50 / p99 of each tool's successful calls;
- for a frozen node, the writes issued while it was frozen: how long each call
  took to be answered, how long each write took to be acknowledged, and for the
  Redis split brain when they were answered relative to the failover
  (``frozen_figures``).
"""

from __future__ import annotations

import asyncio
import secrets
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .clients import Ack, Call, DrillClient, Failed, Log
from .freeze import freeze, process_tree, thaw
from .frozen_figures import frozen_write_figures
from .redis_nodes import DOWN_AFTER_MS
from .topology import WRITE_TIMEOUT_S, Cluster

#: The faults, in the order the issue lists them. The frozen ones (issue 33: SIGSTOP,
#: then SIGCONT) run first: they need the standby the primary phase consumes.
FROZEN_PHASES = ("redis-pause", "redis-split", "primary-pause", "standby-pause")
PHASES = (*FROZEN_PHASES, "primary", "web", "worker", "redis")
FAULTS = {
    "redis-pause": "Redis master frozen (SIGSTOP) briefly, then thawed; no failover",
    "redis-split": "Redis master frozen until the Sentinels promote the replica, then thawed "
    "(split brain until they demote it)",
    "primary-pause": "PostgreSQL primary frozen (SIGSTOP) briefly, then thawed",
    "standby-pause": "synchronous standby (the read replica) frozen briefly, then thawed",
    "primary": "PostgreSQL primary SIGKILLed, standby promoted (pg_ctl promote)",
    "web": "web process 2 SIGKILLed, restarted",
    "worker": "worker 1 SIGKILLed while holding messages, restarted",
    "redis": "Redis master SIGKILLed, Sentinel promotes the replica, old master restarted",
}


@dataclass
class DrillConfig:
    clients: int = 8
    warm_s: float = 5.0
    recover_timeout_s: float = 60.0
    settle_s: float = 5.0
    #: Seconds between the primary's death and the promotion (a failover manager's detection).
    detect_s: float = 1.0
    #: Rebuild the dead primary as the new primary's standby after its phase.
    rebuild_standby: bool = True
    #: Wait, inside the phase, until a restarted worker consumes (the short form does not:
    #: nothing it asserts depends on it).
    await_restarts: bool = True
    phases: tuple[str, ...] = PHASES
    #: Seconds a brief freeze lasts (Redis master, primary, standby): under Sentinel's and
    #: any failover manager's detection, so nothing fails over.
    pause_s: float = 3.0
    #: Seconds the Redis master stays frozen after the Sentinels promoted the replica.
    split_hold_s: float = 2.0


@dataclass
class PhaseResult:
    name: str
    fault: str
    acked: int = 0
    lost: int = 0
    reused: int = 0
    duplicated: int = 0
    ryw_violations: int = 0
    ryw_checked: int = 0
    ryw_unchecked: int = 0
    abandoned: int = 0
    http_500: int = 0
    hangs: int = 0
    calls: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    recovery_s: list[float | None] = field(default_factory=list)
    #: Frozen phases: seconds from the thaw until writes succeed again, per web process.
    after_thaw_s: list[float | None] = field(default_factory=list)
    #: Writes answered "nothing was stored", and of those, the ones stored all the same.
    said_nothing_stored: int = 0
    stored_though_said_not: int = 0
    latency_ms: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: Frozen phases: the writes issued while the node was frozen (``frozen_figures``).
    frozen_writes: dict[str, float] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _error_kind(call: Call) -> str:
    cause = f" ({call.message[:120]})" if call.message else ""
    return f"{call.tool}: {call.outcome}{cause}"


def recovery_s(log: Log, web: int, fault_at: float) -> float | None:
    """Seconds from the fault to the first acknowledged write after the last failed one."""
    writes = [
        c for c in log.calls if c.web == web and c.tool == "remember" and c.started >= fault_at
    ]
    last_failure = max((c.started + c.seconds for c in writes if c.outcome != "ok"), default=0.0)
    ends = [c.started + c.seconds for c in writes if c.outcome == "ok"]
    after = [end for end in ends if end > last_failure]
    return min(after) - fault_at if after else None


class Drill:
    def __init__(self, cluster: Cluster, config: DrillConfig, tokens: list[str]) -> None:
        self.cluster = cluster
        self.config = config
        self.run_id = secrets.token_hex(3)
        self.known_ids: dict[int, tuple[int, str]] = {}
        self.clients = [
            DrillClient(
                n + 1,
                token,
                cluster.urls,
                run_id=self.run_id,
                timeout_s=WRITE_TIMEOUT_S + 15,
                known_ids=self.known_ids,
            )
            for n, token in enumerate(tokens)
        ]
        self.all_acks: list[Ack] = []
        self.lost_ids: set[int] = set()
        self.duplicate_texts: set[str] = set()
        self.reused_ids: set[int] = set()

    async def run(self, report: Callable[[PhaseResult], None] | None = None) -> list[PhaseResult]:
        results = []
        try:
            for name in self.config.phases:
                result = await self.phase(name)
                results.append(result)
                if report is not None:
                    report(result)
        finally:
            for client in self.clients:
                await client.close()
        return results

    async def phase(self, name: str) -> PhaseResult:
        config, log = self.config, Log()
        result = PhaseResult(name, FAULTS[name])
        stop = asyncio.Event()
        hard_stop = time.monotonic() + config.warm_s + config.recover_timeout_s + config.settle_s
        tasks = [asyncio.create_task(c.run(log, stop, hard_stop)) for c in self.clients]
        await asyncio.sleep(config.warm_s)
        fault_at = time.monotonic()
        recovering = asyncio.create_task(asyncio.to_thread(self._fault, name, result))
        deadline = fault_at + config.recover_timeout_s
        webs = range(len(self.cluster.urls))
        while time.monotonic() < deadline:
            if recovering.done() and all(self._back(log, w, fault_at) for w in webs):
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(config.settle_s)
        stop.set()
        await asyncio.wait(tasks, timeout=hard_stop - time.monotonic() + WRITE_TIMEOUT_S + 20)
        for task in tasks:
            if task.done() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        await recovering  # a fault's own failure ends the drill
        result.recovery_s = [recovery_s(log, w, fault_at) for w in webs]
        # Instants (time.monotonic()) the fault noted, for the figures, not for the report.
        frozen_at = result.timings.pop("frozen_at", None)
        failed_over_at = result.timings.pop("failed_over_at", None)
        thawed_at = result.timings.pop("thawed_at", None)
        if thawed_at is not None:
            result.after_thaw_s = [recovery_s(log, w, thawed_at) for w in webs]
        if frozen_at is not None and thawed_at is not None:
            result.frozen_writes = frozen_write_figures(
                log.calls, log.acks, frozen_at, thawed_at, failed_over_at
            )
        self._tally(result, log, fault_at)
        await self._verify(result, log, fault_at)
        if name == "primary" and config.rebuild_standby:
            started = time.monotonic()
            await asyncio.to_thread(self.cluster.pg.rebuild_standby)
            result.timings["standby_rebuilt_s"] = time.monotonic() - started
        return result

    def _back(self, log: Log, web: int, fault_at: float) -> bool:
        writes = [c for c in log.calls if c.web == web and c.tool == "remember"]
        return bool(writes) and writes[-1].outcome == "ok" and writes[-1].started >= fault_at

    def _fault(self, name: str, result: PhaseResult) -> None:
        cluster, started = self.cluster, time.monotonic()
        if name == "primary":
            if cluster.mode == "async":
                result.notes.append(f"replication at the kill: {self._replication_state()}")
            cluster.pg.kill_primary()
            time.sleep(self.config.detect_s)
            promote = time.monotonic()
            cluster.pg.promote_standby()
            result.timings["promote_s"] = time.monotonic() - promote
        elif name == "web":
            cluster.kill_web(1)
            cluster.start_web(1)
            result.timings["web_restarted_s"] = time.monotonic() - started
        elif name == "worker":
            cluster.kill_worker(0)
            cluster.start_worker(0, wait=self.config.await_restarts)
        elif name == "redis-pause":
            redis_master = cluster.redis.master
            assert redis_master is not None and redis_master.process is not None
            # No failover: the Sentinels are told to wait out the freeze, as a deployment
            # whose down-after outlasts a brief pause would.
            cluster.redis.set_down_after(int((self.config.pause_s + 30) * 1000))
            try:
                self._frozen_for([redis_master.process.pid], result)
            finally:
                cluster.redis.set_down_after(DOWN_AFTER_MS)
        elif name == "redis-split":
            frozen_at, failed_over_at, thawed_at, frozen_s = (
                cluster.redis.freeze_master_through_failover(self.config.split_hold_s)
            )
            result.timings["frozen_s"] = frozen_s
            result.timings["failover_into_freeze_s"] = failed_over_at - frozen_at
            result.timings["frozen_at"] = frozen_at
            result.timings["failed_over_at"] = failed_over_at
            result.timings["thawed_at"] = thawed_at
            result.timings["old_master_back_as_replica_s"] = time.monotonic() - started
        elif name == "primary-pause":
            self._frozen_for(process_tree(cluster.pg.primary.postmaster()), result)
        elif name == "standby-pause":
            self._frozen_for(process_tree(cluster.pg.standby.postmaster()), result)
        elif name == "redis":
            result.timings["sentinel_failover_s"] = cluster.redis.kill_master_and_fail_over()
            # Always until it replicates: restarted, it is a master of its own (empty) for a
            # while, and processes still at its address write through it until the
            # Sentinels demote it; the phase must see past that.
            cluster.redis.restart_old_master()
            result.timings["old_master_back_as_replica_s"] = time.monotonic() - started

    def _frozen_for(self, pids: list[int], result: PhaseResult) -> None:
        """SIGSTOP ``pids`` for ``pause_s``, then SIGCONT; the thaw's time for the figures."""
        if not pids:
            raise RuntimeError("the node to freeze is not running")
        result.timings["frozen_at"] = time.monotonic()
        freeze(pids)
        try:
            time.sleep(self.config.pause_s)
        finally:
            thaw(pids)
        result.timings["frozen_s"] = self.config.pause_s
        result.timings["thawed_at"] = time.monotonic()

    def _replication_state(self) -> str:
        try:
            return self.cluster.pg.primary.sql(
                "SELECT application_name || ' ' || state || ', WAL not yet on the standby: '"
                " || pg_size_pretty(pg_wal_lsn_diff(pg_current_wal_lsn(), flush_lsn))"
                " FROM pg_stat_replication"
            )
        except RuntimeError as ex:
            return f"unknown ({ex})"

    def _tally(self, result: PhaseResult, log: Log, fault_at: float) -> None:
        result.acked = len(log.acks)
        result.calls = len(log.calls)
        result.ryw_violations = log.ryw_violations
        result.ryw_checked = log.ryw_checked
        result.ryw_unchecked = log.ryw_unchecked
        result.abandoned = log.abandoned_writes
        result.said_nothing_stored = len(log.said_nothing_stored)
        failed = [c for c in log.calls if c.outcome != "ok"]
        result.http_500 = sum(c.outcome == "HTTP 500" for c in failed)
        result.hangs = sum(c.outcome == "hang" for c in failed)
        result.errors = dict(Counter(_error_kind(c) for c in failed).most_common())
        for tool in sorted({c.tool for c in log.calls}):
            times = [c.seconds * 1000 for c in log.calls if c.tool == tool and c.outcome == "ok"]
            if times:
                result.latency_ms[tool] = (statistics.median(times), _pct(times, 0.99))
        self.all_acks.extend(log.acks)

    async def _verify(self, result: PhaseResult, log: Log, fault_at: float) -> None:
        """Every acknowledged write so far, against each account's export (fresh losses only)."""
        stored: dict[int, dict[int, str]] = {}
        for client in self.clients:
            stored[client.n] = await self._export(client, log)
        newly_lost: list[Ack] = []
        reused = set(log.reused_ids)
        for ack in self.all_acks:
            if ack.memory_id in self.lost_ids:
                continue
            text = stored[ack.user].get(ack.memory_id)
            if text != ack.text:
                self.lost_ids.add(ack.memory_id)
                newly_lost.append(ack)
                if text is not None:
                    reused.add(ack.memory_id)  # the id now names another memory
        result.lost = len(newly_lost)
        result.reused = len(reused - self.reused_ids)
        self.reused_ids |= reused
        if newly_lost:
            before = sorted(fault_at - ack.at for ack in newly_lost if ack.at <= fault_at)
            if before:
                result.notes.append(
                    f"lost writes were acknowledged {before[0]:.1f}-{before[-1]:.1f} s"
                    " before the fault"
                )
        said_not = set(log.said_nothing_stored)
        for texts in stored.values():
            counts = Counter(t for t in texts.values() if self.run_id in t)
            for text, copies in counts.items():
                if copies > 1 and text in said_not:
                    # Rewritten under a new key because the server said nothing was
                    # stored: the answer was false (not a duplicate of the server's making).
                    result.stored_though_said_not += 1
                    self.duplicate_texts.add(text)
                elif copies > 1 and text not in self.duplicate_texts:
                    self.duplicate_texts.add(text)
                    result.duplicated += copies - 1

    async def _export(self, client: DrillClient, log: Log) -> dict[int, str]:
        deadline = time.monotonic() + 60
        while True:
            for web in (client.home, client.other):
                try:
                    return await client.export(log, web)
                except Failed:
                    pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"client {client.n}: no web process answers export_memories")
            await asyncio.sleep(0.5)
