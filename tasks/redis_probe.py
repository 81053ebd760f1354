"""The readiness probe's view of Redis: could a write sent now reach a master? (issue 33)

:class:`WritableProbe` is built once per process and reused by every
``/readyz`` probe: its clients (one per Sentinel, one to the master) keep their
connections, so a probe costs a round trip or two, not a new Sentinel client
and new connections each time. With Sentinels it asks all of them at once,
each bounded by :data:`SENTINEL_PROBE_TIMEOUT_S`, and takes the first that
names a healthy master: one silent Sentinel (its host paused, its packets
dropped) no longer makes every probe time out, which is what Sentinel exists
to survive. Then ``ROLE`` on that master, bounded by :data:`ROLE_TIMEOUT_S`
(PING is not enough: an old master back as a replica answers PING and refuses
every write).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import redis
import redis.asyncio as aredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from .redis_clients import (
    NoMaster,
    ReadOnlyReplica,
    RedisTarget,
    master_options,
    role_of,
    sentinel_options,
)

#: Longest wait on one Sentinel during a probe (they are asked concurrently).
SENTINEL_PROBE_TIMEOUT_S = 0.4
#: Longest wait for the master's answer to ROLE during a probe.
ROLE_TIMEOUT_S = 0.5


def _one_try() -> Retry:
    return Retry(NoBackoff(), 0)


class WritableProbe:
    """Raises unless a write sent now would reach a master (``check``); reusable, cheap."""

    def __init__(self, target: RedisTarget) -> None:
        self._target = target
        self._sentinels: list[aredis.Redis] = []
        self._master: aredis.Redis | None = None
        self._master_address: tuple[str, int] | None = None
        if target.sentinel is not None:
            options = sentinel_options(
                target,
                {"socket_connect_timeout": SENTINEL_PROBE_TIMEOUT_S},
                cap_s=SENTINEL_PROBE_TIMEOUT_S,
            )
            self._sentinels = [
                aredis.Redis(host=host, port=port, retry=_one_try(), **options)
                for host, port in target.sentinel.sentinels
            ]

    async def check(self) -> None:
        """Return when the server (or the master the Sentinels name) says it is a master."""
        client = await self._master_client()
        try:
            kind = await asyncio.wait_for(role_of(client), ROLE_TIMEOUT_S)
        except (redis.RedisError, OSError, TimeoutError):
            # A stalled or broken connection is not reused: the next probe connects afresh.
            await client.connection_pool.disconnect()
            raise
        if kind != "master":
            raise ReadOnlyReplica(f"the Redis server at {self._target.describe()} is a {kind}")

    async def _master_client(self) -> aredis.Redis:
        if self._target.sentinel is None:
            if self._master is None:
                assert self._target.url is not None, "a target names a URL or Sentinels"
                self._master = aredis.Redis.from_url(
                    self._target.url,
                    socket_connect_timeout=ROLE_TIMEOUT_S,
                    socket_timeout=ROLE_TIMEOUT_S,
                    retry=_one_try(),
                )
            return self._master
        address = await self._discover()
        if self._master is None or address != self._master_address:
            if self._master is not None:
                await self._master.aclose()
            options = {
                **master_options(self._target.url),
                "socket_connect_timeout": ROLE_TIMEOUT_S,
                "socket_timeout": ROLE_TIMEOUT_S,
            }
            self._master = aredis.Redis(
                host=address[0], port=address[1], retry=_one_try(), **options
            )
            self._master_address = address
        return self._master

    async def _discover(self) -> tuple[str, int]:
        """The master's address from the first Sentinel that gives a healthy one."""
        assert self._target.sentinel is not None
        name = self._target.sentinel.master
        asks = [asyncio.create_task(self._ask(s, name)) for s in self._sentinels]
        try:
            for done in asyncio.as_completed(asks):
                with contextlib.suppress(redis.RedisError, OSError, TimeoutError):
                    found = await done
                    if found is not None:
                        return found
        finally:
            for ask in asks:
                ask.cancel()
        raise NoMaster(f"no Sentinel named a healthy master {name!r}")

    @staticmethod
    async def _ask(sentinel: aredis.Redis, name: str) -> tuple[str, int] | None:
        try:
            asked: Any = sentinel.sentinel_masters()
            masters: dict[str, Any] = await asyncio.wait_for(asked, SENTINEL_PROBE_TIMEOUT_S)
        except (redis.RedisError, OSError, TimeoutError):
            await sentinel.connection_pool.disconnect()
            raise
        state = masters.get(name)
        if not state or not state.get("is_master") or state.get("is_sdown"):
            return None
        if state.get("is_odown"):
            return None
        return str(state["ip"]), int(state["port"])

    async def aclose(self) -> None:
        for client in [*self._sentinels, *([self._master] if self._master else [])]:
            with contextlib.suppress(Exception):
                await client.aclose()
