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
replica that is not lagging has replayed it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool

from .errors import StorageError

_log = logging.getLogger(__name__)

#: Seconds between two measures of every replica.
HEALTH_INTERVAL_S = 1.0
#: Seconds one measure (one replica) may take before the replica counts as down.
MEASURE_TIMEOUT_S = 2.0
#: Primary positions kept to turn a replica's position into a lag (one per measure).
PRIMARY_SAMPLES = 600

ReplicaState = Literal["starting", "ok", "lagging", "down"]

_PRIMARY_POSITION = "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint"
_REPLICA_POSITION = "SELECT pg_is_in_recovery(), (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint"
_SYSTEM_ID = "SELECT system_identifier::text FROM pg_control_system()"


class ReplicaRefused(StorageError):
    """A DATABASE_REPLICA_URLS entry is no standby of DATABASE_URL's primary."""


class WritePositions(Protocol):
    """Each user's last acknowledged write, as a WAL position all web processes see."""

    async def get(self, user_id: int) -> int | None: ...

    async def put(self, user_id: int, position: int, ttl_s: float) -> None:
        """Keep the larger of ``position`` and the one recorded, for ``ttl_s`` seconds."""
        ...


class LocalPositions:
    """:class:`WritePositions` in this process: enough when there is one web process (no Redis)."""

    def __init__(self) -> None:
        self._positions: dict[int, tuple[int, float]] = {}

    async def get(self, user_id: int) -> int | None:
        found = self._positions.get(user_id)
        if found is None or found[1] < time.monotonic():
            self._positions.pop(user_id, None)
            return None
        return found[0]

    async def put(self, user_id: int, position: int, ttl_s: float) -> None:
        known = await self.get(user_id)
        self._positions[user_id] = (max(position, known or 0), time.monotonic() + ttl_s)


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
                replica.state = "down"
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
                # failover), only the primary is sure to hold their writes.
                _log.warning(
                    "could not read a user's last write position (%s): the read goes to the primary",
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
        """A read on ``pool`` failed: skip that replica until the next measure finds it well."""
        for replica in self._replicas:
            if replica.pool is pool:
                replica.state = "down"

    def status(self) -> list[ReplicaStatus]:
        return [ReplicaStatus(r.name, r.state, r.lag_s, r.reads) for r in self._replicas]

    # --- health -------------------------------------------------------------

    async def measure(self) -> None:
        """One measure of the primary's position and every replica's state and lag."""
        try:
            position = await asyncio.wait_for(
                _position(self.primary, _PRIMARY_POSITION), MEASURE_TIMEOUT_S
            )
            self._samples.append((time.monotonic(), int(str(position[1]))))
        except (psycopg.Error, TimeoutError) as ex:
            # No primary (a failover under way): the replicas keep their last state.
            _log.warning("replica health: the primary did not answer (%s)", type(ex).__name__)
        await asyncio.gather(*(self._measure(r) for r in self._replicas))

    async def _measure(self, replica: _Replica) -> None:
        try:
            # Bounded as a whole: a replica whose machine vanished must not stall the loop.
            row = await asyncio.wait_for(
                _position(replica.pool, _REPLICA_POSITION), MEASURE_TIMEOUT_S
            )
        except Exception as ex:  # any failure: the replica serves nothing until it answers
            if replica.state != "down":
                _log.warning(
                    "replica %s is down (%s): reads go elsewhere", replica.name, type(ex).__name__
                )
            replica.state, replica.lag_s = "down", None
            return
        in_recovery, replayed = bool(row[0]), row[1]
        if not in_recovery or replayed is None:
            # Promoted (it is a primary now) or not replaying: not a replica to read from.
            if replica.state != "down":
                _log.warning("replica %s is no longer a standby: reads skip it", replica.name)
            replica.state, replica.lag_s = "down", None
            return
        replica.replayed = int(str(replayed))
        replica.lag_s = self._lag(replica.replayed)
        state: ReplicaState = "ok" if replica.lag_s <= self._max_lag_s else "lagging"
        if state != replica.state:
            log = _log.info if state == "ok" else _log.warning
            log("replica %s is %s (lag %.1f s)", replica.name, state, replica.lag_s)
        replica.state = state

    def _lag(self, replayed: int) -> float:
        """Seconds since the primary was last at or before ``replayed`` (0: caught up)."""
        if not self._samples or replayed >= self._samples[-1][1]:
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


async def _position(pool: AsyncConnectionPool, query: str) -> tuple[object, object]:
    """The first row of ``query`` (the first column twice when it has one)."""
    async with pool.connection(timeout=MEASURE_TIMEOUT_S) as conn:
        cur = await conn.execute(query)
        row = await cur.fetchone()
    assert row is not None
    return (row[0], row[-1])


async def _one(conn: AsyncConnection, query: str) -> object:
    cur = await conn.execute(query)
    row = await cur.fetchone()
    assert row is not None
    return row[0]
