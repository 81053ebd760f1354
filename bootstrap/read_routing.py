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
  loses its connection on a replica, or that the standby cancels to replay
  WAL, or that waits on a replica the health loop marks down (it froze), runs
  again on the primary: reads change nothing, so running one twice is safe.
  A statement timeout or another error of the query itself is answered as it
  is, and leaves the replica serving (issue 33, finding 7). What a read writes
  (the audit record, a token's "last used") goes through the collaborators
  built on the primary pool (``AuditLog``, ``KeyStore``), as before.
- The writes' side, recording each acknowledged write's WAL position, is
  :class:`bootstrap.recording_queue.RecordingWriteQueue`.
- Positions live in Redis with a deadline per call and a circuit breaker
  (:mod:`bootstrap.write_positions`); without Redis, in the one web process.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from config.settings import Settings, SettingsError
from memory.calls import CallMeta
from memory.commands import Command
from memory.deps import Deps
from memory.errors import DATABASE_ERROR, MemoryServiceError
from memory.handlers import read_commands
from storage.pool import connection_defaults, make_pool
from storage.replicas import PRIMARY_ONLY, LocalPositions, ReplicaSet, WritePositions
from tasks.redis_clients import RedisTarget, async_client, no_retry

from .write_positions import (
    POSITIONS_TIMEOUT_S,
    GuardedPositions,
    RedisPositions,
)

if TYPE_CHECKING:
    from api.runtime import CommandRunner

__all__ = [
    "PRIMARY_ONLY",
    "RedisPositions",
    "build_replicas",
    "routed_runner",
]

_log = logging.getLogger(__name__)

#: The web processes uvicorn runs (the Procfile's ``--workers``); read here because this is
#: the one setting that makes per-process write positions wrong (issue 33, finding 4).
WEB_CONCURRENCY_VARIABLE = "WEB_CONCURRENCY"
#: SQLSTATE of a standby cancelling a query that conflicts with replay (hot standby):
#: the replica's doing, not the query's; the read runs again on the primary.
RECOVERY_CONFLICT = "40001"


def build_replicas(
    settings: Settings, primary: AsyncConnectionPool, *, web_processes: int | None = None
) -> ReplicaSet | None:
    """The replica set of DATABASE_REPLICA_URLS (closed pools), or None when there is none.

    Refuses (SettingsError) replicas with several web processes and no Redis: each
    process would know only its own users' write positions, so a read served by
    another process could miss the user's write on a lagging replica (finding 4).
    """
    if not settings.database_replica_urls:
        return None
    positions: WritePositions
    target = RedisTarget.from_settings(settings)
    if target is not None:
        # The master, found through REDIS_SENTINELS when set (it follows a Sentinel failover).
        # One try per call, each bounded, the store skipped a while after it fails.
        client = async_client(
            target,
            socket_timeout=POSITIONS_TIMEOUT_S,
            socket_connect_timeout=POSITIONS_TIMEOUT_S,
            retry=no_retry(),
        )
        positions = GuardedPositions(
            RedisPositions(client, settings.queue_namespace),
            reconnect=client.connection_pool.disconnect,
        )
    else:
        processes = web_processes if web_processes is not None else _web_processes()
        if processes > 1:
            raise SettingsError(
                "DATABASE_REPLICA_URLS",
                f"needs REDIS_URL or REDIS_SENTINELS with {processes} web processes "
                f"({WEB_CONCURRENCY_VARIABLE}={processes}): without Redis each process knows "
                "only the writes it answered, and a read on another process could miss the "
                "user's own write on a lagging replica. Set REDIS_URL (or REDIS_SENTINELS), "
                f"or run one web process ({WEB_CONCURRENCY_VARIABLE}=1), or drop the replicas",
            )
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
        down = replicas.went_down(pool)
        try:
            return await _on_replica(run(dataclasses.replace(deps, pool=pool), meta, command), down)
        except _ReplicaStalled:
            _log.warning("a read stalled on a replica marked down; it runs again on the primary")
            return await run(deps, meta, command)
        except MemoryServiceError as ex:
            cause = replica_failure(ex)
            if cause is None:
                raise  # the query's own failure (a statement timeout, a bad query): as is
            _log.warning("a read failed on a replica (%s); it runs again on the primary", cause)
            if cause == "connection":
                replicas.mark_down(pool)
            return await run(deps, meta, command)

    return routed


class _ReplicaStalled(Exception):
    """The replica a read waits on was marked down meanwhile (its health measure stalled)."""


async def _on_replica(read: Awaitable[dict[str, Any]], down: asyncio.Event) -> dict[str, Any]:
    """``read``'s answer; :class:`_ReplicaStalled` as soon as its replica is marked down.

    A replica that froze (its machine paused, its packets dropped) answers nothing and
    closes nothing: the read would wait for TCP to give up. The health loop marks it
    down within HEALTH_INTERVAL_S + MEASURE_TIMEOUT_S (3 s); the read gives up then.
    """
    task = asyncio.ensure_future(read)
    watch = asyncio.ensure_future(down.wait())
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    if task.done():
        return task.result()
    task.cancel()  # psycopg cancels the query in the background; its connection is dropped
    task.add_done_callback(_retrieve)
    raise _ReplicaStalled


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: a cancelled read's error is expected, not news


def replica_failure(ex: MemoryServiceError) -> str | None:
    """Why a read failed on a replica when it was the replica's doing, else None.

    ``connection``: the connection failed (lost, refused, reset, the pool had none):
    the replica is marked down for everyone. ``recovery conflict``: the standby
    cancelled the query to replay WAL: run again on the primary, the replica stays.
    A statement timeout or any other error of the query itself is the query's: the
    primary would fail it too, and marking the replica down would move every read
    there (issue 33, finding 7).
    """
    if ex.code != DATABASE_ERROR:
        return None
    cause = ex.__cause__
    if isinstance(cause, psycopg.errors.QueryCanceled):
        return None  # statement_timeout, or a cancel: the query's own doing
    if isinstance(cause, psycopg.OperationalError):  # PoolTimeout, lost connections
        return "connection"
    if isinstance(cause, psycopg.Error) and cause.sqlstate == RECOVERY_CONFLICT:
        return "recovery conflict"
    return None


def _web_processes() -> int:
    try:
        return max(int(os.environ.get(WEB_CONCURRENCY_VARIABLE, "1")), 1)
    except ValueError:
        return 1
