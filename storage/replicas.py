"""Read replicas: which server a read goes to, and how far behind each replica is.

A :class:`ReplicaSet` holds one pool per streaming standby named in
``DATABASE_REPLICA_URLS`` and a health loop (one per process) that measures,
every :data:`HEALTH_INTERVAL_S`, each replica's replayed WAL position
(``pg_last_wal_replay_lsn()``) against samples of the primary's
(``pg_current_wal_lsn()``). A replica's *lag* is how long ago the primary
was where the replica is now (0 when it has replayed everything), which
stays right when the primary is idle, unlike ``now() -
pg_last_xact_replay_timestamp()``. A replica that fails the measure is
*down*; one whose lag exceeds ``REPLICA_MAX_LAG_S`` is *lagging*; both are
skipped until a later measure finds them healthy again.

Read-your-writes: after each acknowledged write the caller records the
primary's WAL position for the user (:meth:`ReplicaSet.wrote`, kept in a
:class:`WritePositions` every web process shares). A read goes to a healthy
replica whose last measured replay position has reached the user's recorded
one, else to the primary. Positions only grow, so a replica measured past
it stays past it. A position is kept :func:`position_ttl_s`: by then any
replica that is not lagging has replayed it. A write whose position could not
be read *pins* its user to the primary (:meth:`WritePositions.pin`) for that
long, once: later writes do not renew a pin (issue 33, finding 6).

A replica serves only while it replays the primary's timeline (issue 33,
finding 5): after a failover, a standby still on the old timeline may hold
writes the new primary never had, however far its replay position reads.

The primary's position is sampled on a connection of the health loop's own,
not through the serving pool: under load the pool's connections are all busy,
samples went stale, and a lagging replica read as 0 s behind (finding 8).
While no sample is fresh (the primary does not answer: it stalls, or a
failover is under way) a replica's lag is unknown (``lag_s`` None); it keeps
serving only if it had replayed the last position the primary gave, so a
frozen primary's caught-up standby still answers reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool

from .errors import StorageError

_log = logging.getLogger(__name__)

T = TypeVar("T")

#: Seconds between two measures of every replica.
HEALTH_INTERVAL_S = 1.0
#: Seconds one measure (one replica) may take before the replica counts as down.
MEASURE_TIMEOUT_S = 2.0
#: Primary positions kept to turn a replica's position into a lag (one per measure).
PRIMARY_SAMPLES = 600
#: A primary sample older than this (seconds) no longer tells a replica's lag: unknown.
SAMPLE_FRESH_S = 3 * HEALTH_INTERVAL_S + MEASURE_TIMEOUT_S
#: What :meth:`WritePositions.get` answers for a pinned user: above any WAL position.
PRIMARY_ONLY = 2**62

ReplicaState = Literal["starting", "ok", "lagging", "down"]

_PRIMARY_POSITION = "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint"
# The timeline a WAL file name starts with (8 hex digits) is the one the primary writes.
_PRIMARY_TIMELINE = (
    "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint,"
    " ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int"
)
# A standby's timeline: its WAL receiver's, else (not streaming) its last restartpoint's.
_REPLICA_POSITION = (
    "SELECT pg_is_in_recovery(), (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint,"
    " coalesce((SELECT received_tli FROM pg_stat_wal_receiver),"
    " (SELECT timeline_id FROM pg_control_checkpoint()))"
)
_SYSTEM_ID = "SELECT system_identifier::text FROM pg_control_system()"


class ReplicaRefused(StorageError):
    """A DATABASE_REPLICA_URLS entry is no standby of DATABASE_URL's primary."""


class WritePositions(Protocol):
    """Each user's last acknowledged write, as a WAL position all web processes see."""

    async def get(self, user_id: int) -> int | None: ...

    async def put(self, user_id: int, position: int, ttl_s: float) -> None:
        """Keep the larger of ``position`` and the one recorded, for ``ttl_s`` seconds."""
        ...

    async def pin(self, user_id: int, ttl_s: float) -> None:
        """Send the user's reads to the primary for ``ttl_s`` seconds (:data:`PRIMARY_ONLY`
        from :meth:`get`), whatever is put meanwhile; a put never extends a pin."""
        ...


class LocalPositions:
    """:class:`WritePositions` in this process: enough when there is one web process (no Redis)."""

    def __init__(self) -> None:
        self._positions: dict[int, tuple[int, float]] = {}
        self._pins: dict[int, float] = {}

    async def get(self, user_id: int) -> int | None:
        now = time.monotonic()
        if self._pins.get(user_id, 0.0) > now:
            return PRIMARY_ONLY
        self._pins.pop(user_id, None)
        found = self._positions.get(user_id)
        if found is None or found[1] < now:
            self._positions.pop(user_id, None)
            return None
        return found[0]

    async def put(self, user_id: int, position: int, ttl_s: float) -> None:
        found = self._positions.get(user_id)
        known = found[0] if found is not None and found[1] >= time.monotonic() else 0
        self._positions[user_id] = (max(position, known), time.monotonic() + ttl_s)

    async def pin(self, user_id: int, ttl_s: float) -> None:
        self._pins[user_id] = time.monotonic() + ttl_s


def position_ttl_s(max_lag_s: float) -> float:
    """How long a user's write position is kept: well past the lag a served replica may have."""
    return max(60.0, 10 * max_lag_s)


def replica_label(dsn: str) -> str:
    """``host:port/dbname`` of a replica, for logs, /readyz and /metrics (never a password)."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "replica"
    host = str(params.get("host") or params.get("hostaddr") or "local")
    port = str(params.get("port") or "5432")
    return f"{host}:{port}/{params.get('dbname') or ''}"


@dataclass(frozen=True)
class ReplicaStatus:
    """One replica as the last measure found it."""

    name: str
    state: ReplicaState
    #: Seconds behind the primary; None when not measured (down, or starting).
    lag_s: float | None
    #: Reads served since the process started.
    reads: int


class _Replica:
    def __init__(self, name: str, dsn: str, pool: AsyncConnectionPool) -> None:
        self.name = name
        self.dsn = dsn
        self.pool = pool
        self.state: ReplicaState = "starting"
        self.lag_s: float | None = None
        self.replayed = -1
        self.reads = 0
        #: Set when the replica is marked down: a read in flight there gives up (a stall).
        self.went_down = asyncio.Event()

    def set_state(self, state: ReplicaState) -> None:
        if state == "down":
            self.went_down.set()
        elif self.state == "down" or self.went_down.is_set():
            self.went_down = asyncio.Event()
        self.state = state


class ReplicaSet:
    """The primary pool and the replicas' pools; routes each read (module docstring)."""

    def __init__(
        self,
        primary: AsyncConnectionPool,
        replicas: Sequence[tuple[str, AsyncConnectionPool]],
        positions: WritePositions,
        *,
        max_lag_s: float,
    ) -> None:
        self.primary = primary
        self._replicas = [_Replica(replica_label(dsn), dsn, pool) for dsn, pool in replicas]
        self.positions = positions
        self._max_lag_s = max_lag_s
        #: Seconds a user's write position is kept (:func:`position_ttl_s`).
        self.position_ttl_s = position_ttl_s(max_lag_s)
        self._samples: deque[tuple[float, int]] = deque(maxlen=PRIMARY_SAMPLES)
        #: The primary's timeline at the last sample (None before the first).
        self.primary_timeline: int | None = None
        # The health loop's own connection to the primary (never the serving pool's).
        self._monitor: AsyncConnection | None = None
        self._turn = itertools.count()
        self._loop: asyncio.Task[None] | None = None
        #: Reads the primary served because no replica could (metrics).
        self.primary_reads = 0

    # --- lifecycle ----------------------------------------------------------

    async def check(self, primary_dsn: str) -> list[str]:
        """Start-up checks; the warnings to log. Raises ReplicaRefused with the reason.

        An unreachable replica is only a warning: it is skipped until it
        answers. A replica that is itself a primary (``pg_is_in_recovery()``
        false), or a standby of another cluster (another
        ``system_identifier``), is refused: reads there would miss writes.
        """
        async with await AsyncConnection.connect(primary_dsn, autocommit=True) as conn:
            expected = await _one(conn, _SYSTEM_ID)
        warnings = []
        for replica in self._replicas:
            try:
                async with await AsyncConnection.connect(
                    replica.dsn, autocommit=True, connect_timeout=int(MEASURE_TIMEOUT_S) + 1
                ) as conn:
                    system_id = await _one(conn, _SYSTEM_ID)
                    in_recovery = await _one(conn, "SELECT pg_is_in_recovery()")
            except psycopg.OperationalError as ex:
                replica.set_state("down")
                warnings.append(
                    f"DATABASE_REPLICA_URLS: {replica.name} is unreachable "
                    f"({type(ex).__name__}); reads skip it until it answers"
                )
                continue
            if system_id != expected:
                raise ReplicaRefused(
                    f"DATABASE_REPLICA_URLS: {replica.name} is another database (system "
                    f"identifier {system_id}, the primary's is {expected}), not a standby of "
                    "DATABASE_URL"
                )
            if not in_recovery:
                raise ReplicaRefused(
                    f"DATABASE_REPLICA_URLS: {replica.name} is a primary (pg_is_in_recovery() "
                    "is false), not a streaming standby: reads there would miss writes"
                )
        return warnings

    async def open(self) -> None:
        """Open the replicas' pools (not waiting: a down replica must not stop start-up)."""
        for replica in self._replicas:
            await replica.pool.open(wait=False)
        await self.measure()
        self._loop = asyncio.create_task(self._health_forever())

    async def close(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
            self._loop = None
        for replica in self._replicas:
            await replica.pool.close()
        await self._drop_monitor()
        closer = getattr(self.positions, "aclose", None)
        if closer is not None:
            await closer()

    # --- routing ------------------------------------------------------------

    async def pool_for_read(self, user_id: int) -> AsyncConnectionPool:
        """A healthy replica that has replayed ``user_id``'s last write, else the primary."""
        ready = [r for r in self._replicas if r.state == "ok"]
        if ready:
            try:
                needed = await self.positions.get(user_id)
            except Exception as ex:  # the store is Redis's (any client error), or in-process
                # Without the user's last write position (Redis down, or in a Sentinel
                # failover), only the primary is sure to hold their writes. A store that
                # is being skipped after a failure (``expected``) was logged then.
                if not getattr(ex, "expected", False):
                    _log.warning(
                        "could not read a user's last write position (%s): "
                        "the read goes to the primary",
                        type(ex).__name__,
                    )
                ready = []
            else:
                if needed is not None:
                    ready = [r for r in ready if r.replayed >= needed]
        if not ready:
            self.primary_reads += 1
            return self.primary
        chosen = ready[next(self._turn) % len(ready)]
        chosen.reads += 1
        return chosen.pool

    async def wrote(self, user_id: int) -> None:
        """Record the primary's WAL position now, after ``user_id``'s write has committed."""
        async with self.primary.connection() as conn:
            position = await _one(conn, _PRIMARY_POSITION)
        await self.positions.put(user_id, int(str(position)), self.position_ttl_s)

    def is_replica(self, pool: AsyncConnectionPool) -> bool:
        return any(r.pool is pool for r in self._replicas)

    def mark_down(self, pool: AsyncConnectionPool) -> None:
        """A read on ``pool`` lost its connection: skip that replica until a measure finds
        it well (only connection-class failures: bootstrap.read_routing decides)."""
        for replica in self._replicas:
            if replica.pool is pool:
                replica.set_state("down")

    def went_down(self, pool: AsyncConnectionPool) -> asyncio.Event:
        """Set when the replica of ``pool`` is next marked down (a read there gives up)."""
        for replica in self._replicas:
            if replica.pool is pool:
                return replica.went_down
        raise KeyError("not a replica's pool")

    def status(self) -> list[ReplicaStatus]:
        return [ReplicaStatus(r.name, r.state, r.lag_s, r.reads) for r in self._replicas]

    # --- health -------------------------------------------------------------

    async def measure(self) -> None:
        """One measure of the primary's position and every replica's state and lag."""
        try:
            row = await _bounded(self._sample_primary(), MEASURE_TIMEOUT_S)
            self._samples.append((time.monotonic(), int(str(row[0]))))
            self.primary_timeline = int(str(row[1]))
        except (psycopg.Error, OSError, TimeoutError) as ex:
            # No primary (a failover under way, or it stalls): the replicas keep their
            # state, their lag is unknown; reads still need the user's position replayed.
            _log.warning("replica health: the primary did not answer (%s)", type(ex).__name__)
            await self._drop_monitor()
        await asyncio.gather(*(self._measure(r) for r in self._replicas))

    async def _sample_primary(self) -> tuple[object, ...]:
        """The primary's WAL position and timeline, on the health loop's own connection."""
        if self._monitor is None or self._monitor.closed:
            conninfo = self.primary.conninfo
            if not isinstance(conninfo, str):  # a pool built on a callable: share its connections
                return await _position(self.primary, _PRIMARY_TIMELINE)
            self._monitor = await AsyncConnection.connect(
                conninfo, autocommit=True, connect_timeout=int(MEASURE_TIMEOUT_S) + 1
            )
        cur = await self._monitor.execute(_PRIMARY_TIMELINE)
        row = await cur.fetchone()
        assert row is not None
        return tuple(row)

    async def _drop_monitor(self) -> None:
        monitor, self._monitor = self._monitor, None
        if monitor is not None:
            with contextlib.suppress(Exception):
                # Closing sends a goodbye; a stalled server must not hold the loop.
                await _bounded(monitor.close(), 0.5)

    async def _measure(self, replica: _Replica) -> None:
        try:
            # Bounded as a whole: a replica whose machine vanished must not stall the loop.
            row = await _bounded(_position(replica.pool, _REPLICA_POSITION), MEASURE_TIMEOUT_S)
        except Exception as ex:  # any failure: the replica serves nothing until it answers
            if replica.state != "down":
                _log.warning(
                    "replica %s is down (%s): reads go elsewhere", replica.name, type(ex).__name__
                )
            replica.set_state("down")
            replica.lag_s = None
            return
        in_recovery, replayed, timeline = bool(row[0]), row[1], row[2]
        if not in_recovery or replayed is None:
            # Promoted (it is a primary now) or not replaying: not a replica to read from.
            if replica.state != "down":
                _log.warning("replica %s is no longer a standby: reads skip it", replica.name)
            replica.set_state("down")
            replica.lag_s = None
            return
        if self.primary_timeline is not None and timeline != self.primary_timeline:
            # Another timeline: its history forked from the primary's (a failover it did
            # not follow); a position there says nothing about what the primary holds.
            if replica.state != "down":
                _log.warning(
                    "replica %s replays timeline %s, the primary is on %s: reads skip it",
                    replica.name,
                    timeline,
                    self.primary_timeline,
                )
            replica.set_state("down")
            replica.lag_s = None
            return
        replica.replayed = int(str(replayed))
        replica.lag_s = self._lag(replica.replayed)
        if replica.lag_s is None:  # unknown: caught up with the last sample, or lagging
            caught_up = bool(self._samples) and replica.replayed >= self._samples[-1][1]
            state: ReplicaState = "ok" if caught_up else "lagging"
        else:
            state = "ok" if replica.lag_s <= self._max_lag_s else "lagging"
        if state != replica.state:
            log = _log.info if state == "ok" else _log.warning
            log("replica %s is %s (lag %s s)", replica.name, state, replica.lag_s)
        replica.set_state(state)

    def _lag(self, replayed: int) -> float | None:
        """Seconds since the primary was last at or before ``replayed`` (0: caught up);
        None (unknown) when no recent sample of the primary says where it is now."""
        if not self._samples or self._samples[-1][0] < time.monotonic() - SAMPLE_FRESH_S:
            return None
        if replayed >= self._samples[-1][1]:
            return 0.0
        behind_since = None
        for at, position in reversed(self._samples):
            if position <= replayed:
                break
            behind_since = at
        # Behind every sample kept: at least as old as the oldest one.
        assert behind_since is not None
        return round(time.monotonic() - behind_since, 3)

    async def _health_forever(self) -> None:
        while True:
            await asyncio.sleep(HEALTH_INTERVAL_S)
            try:
                await self.measure()
            except Exception:  # the loop must outlive any one failure
                _log.exception("replica health check failed")
            # Positions this process could not record while their store was down
            # (bootstrap.write_positions.GuardedPositions keeps them): recorded now.
            flush = getattr(self.positions, "flush", None)
            if flush is not None:
                with contextlib.suppress(Exception):  # still down: the next turn tries again
                    await flush()


async def _bounded(work: Coroutine[Any, Any, T], timeout_s: float) -> T:
    """``work``'s result, or TimeoutError after ``timeout_s`` without waiting for it to stop.

    ``asyncio.wait_for`` waits for the cancelled work to finish, and psycopg answers a
    cancellation by asking the server to cancel the query, for up to 10 s more: on a
    frozen server the health loop would stall that long. The work is cancelled and
    left to end in the background instead.
    """
    task = asyncio.ensure_future(work)
    done, _ = await asyncio.wait({task}, timeout=timeout_s)
    if task in done:
        return task.result()
    task.cancel()
    task.add_done_callback(_retrieved)
    raise TimeoutError


def _retrieved(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # expected after a cancellation; retrieved so it is not logged


async def _position(pool: AsyncConnectionPool, query: str) -> tuple[object, ...]:
    """The first row of ``query``."""
    async with pool.connection(timeout=MEASURE_TIMEOUT_S) as conn:
        cur = await conn.execute(query)
        row = await cur.fetchone()
    assert row is not None
    return tuple(row)


async def _one(conn: AsyncConnection, query: str) -> object:
    cur = await conn.execute(query)
    row = await cur.fetchone()
    assert row is not None
    return row[0]
