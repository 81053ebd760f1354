"""Read replicas wired into a web process (issue 29): routed reads, recorded writes.

- :func:`build_replicas`: the :class:`~storage.replicas.ReplicaSet` of
  ``DATABASE_REPLICA_URLS`` (None without it), over the web pool as primary,
  with the write positions in Redis when ``REDIS_URL`` or ``REDIS_SENTINELS`` is set (every web
  process sees them) and in this process otherwise (then there is one).
- :func:`routed_runner`: the inline runner (``memory.handlers.dispatch``)
  running each read command (its handler's ``@handles(..., reads=True)``:
  ``memory.handlers.read_commands``; issue 29, item 2) with a ``Deps`` whose
  pool is the one :meth:`ReplicaSet.pool_for_read` picks for the caller; the
  handlers themselves know nothing of replicas. A read that
  fails on a replica (it went down mid-read) runs again on the primary:
  reads change nothing, so running one twice is safe. What a read writes
  (the audit record, a token's "last used") goes through the collaborators
  built on the primary pool (``AuditLog``, ``KeyStore``), as before.
- :class:`RecordingWriteQueue`: after each write the queue acknowledges, the
  primary's WAL position is recorded for the user, before the answer leaves.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

import redis.asyncio as aredis
from psycopg_pool import AsyncConnectionPool

from config.settings import Settings
from memory.calls import CallMeta
from memory.commands import Command
from memory.deps import Deps
from memory.errors import DATABASE_ERROR, MemoryServiceError
from memory.handlers import read_commands
from storage.pool import connection_defaults, make_pool
from storage.replicas import LocalPositions, ReplicaSet, WritePositions
from tasks.redis_clients import RedisTarget, async_client

if TYPE_CHECKING:
    from api.runtime import CommandRunner, WriteQueue

_log = logging.getLogger(__name__)

#: Recorded when a write's position could not be read: the user's reads go to the
#: primary until the position expires (larger than any WAL position).
PRIMARY_ONLY = 2**62


class RedisPositions:
    """:class:`~storage.replicas.WritePositions` in Redis: one key per user, with a TTL."""

    # Keep the larger position: two writes of one user may finish in either order.
    _PUT = """
local known = redis.call('GET', KEYS[1])
if (not known) or tonumber(known) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
"""

    def __init__(self, client: aredis.Redis, namespace: str) -> None:
        self._client = client
        self._prefix = f"{namespace}:ryw:"

    async def get(self, user_id: int) -> int | None:
        value = await self._client.get(f"{self._prefix}{user_id}")
        return None if value is None else int(value)

    async def put(self, user_id: int, position: int, ttl_s: float) -> None:
        await self._client.eval(
            self._PUT, 1, f"{self._prefix}{user_id}", str(position), str(int(ttl_s * 1000))
        )

    async def aclose(self) -> None:
        await self._client.aclose()


def build_replicas(settings: Settings, primary: AsyncConnectionPool) -> ReplicaSet | None:
    """The replica set of DATABASE_REPLICA_URLS (closed pools), or None when there is none."""
    if not settings.database_replica_urls:
        return None
    positions: WritePositions
    target = RedisTarget.from_settings(settings)
    if target is not None:
        # The master, found through REDIS_SENTINELS when set (it follows a Sentinel failover).
        positions = RedisPositions(
            async_client(target, socket_timeout=2, socket_connect_timeout=2),
            settings.queue_namespace,
        )
    else:
        positions = LocalPositions()
    pools = []
    for index, url in enumerate(settings.database_replica_urls):
        dsn = connection_defaults(
            url,
            connect_timeout_s=settings.db_connect_timeout_s,
            statement_timeout_s=settings.db_statement_timeout_s,
            writable=False,
        )
        pool = make_pool(
            dsn,
            min_size=settings.db_pool_min,
            max_size=settings.db_pool_max,
            name=f"replica{index}",
        )
        pools.append((dsn, pool))
    return ReplicaSet(primary, pools, positions, max_lag_s=settings.replica_max_lag_s)


def routed_runner(
    run: CommandRunner,
    replicas: ReplicaSet | None,
    reads: tuple[type[Command], ...] | None = None,
) -> CommandRunner:
    """``run`` with each read command served where ``replicas`` says (itself without replicas).

    ``reads``: the commands a replica may serve; by default those whose handlers only read.
    """
    if replicas is None:
        return run
    read_only = read_commands() if reads is None else reads

    async def routed(deps: Deps, meta: CallMeta, command: Command) -> dict[str, Any]:
        if not isinstance(command, read_only):
            return await run(deps, meta, command)
        pool = await replicas.pool_for_read(meta.user_id)
        if pool is replicas.primary:
            return await run(deps, meta, command)
        try:
            return await run(dataclasses.replace(deps, pool=pool), meta, command)
        except MemoryServiceError as ex:
            if ex.code != DATABASE_ERROR:
                raise
            _log.warning("a read failed on a replica; it runs again on the primary")
            replicas.mark_down(pool)
            return await run(deps, meta, command)

    return routed


class RecordingWriteQueue:
    """A write queue that records each acknowledged write's WAL position for its user."""

    def __init__(self, queue: WriteQueue, replicas: ReplicaSet) -> None:
        self._queue = queue
        self._replicas = replicas

    async def submit(self, meta: CallMeta, command: Command) -> dict[str, Any]:
        payload = await self._queue.submit(meta, command)
        user_id = meta.user_id
        try:
            await self._replicas.wrote(user_id)
        except Exception as ex:
            # The write has committed; without its position the user reads from the primary.
            _log.warning("could not record a write's WAL position (%s)", type(ex).__name__)
            try:
                await self._replicas.positions.put(
                    user_id, PRIMARY_ONLY, self._replicas.position_ttl_s
                )
            except Exception as again:
                _log.error(
                    "could not route the user's reads to the primary either (%s): they may "
                    "miss this write on a replica until it replays it",
                    type(again).__name__,
                )
        return payload

    def __getattr__(self, name: str) -> Any:
        # Everything else (queue_depths for /metrics, aclose) is the wrapped queue's.
        return getattr(self._queue, name)
