"""Each user's last write position in Redis, with a stated deadline and a circuit breaker.

- :class:`RedisPositions`: :class:`~storage.replicas.WritePositions` in Redis, one
  key per user (the position, kept the larger) and one per pinned user (a pin
  expires on its own: a later write never renews it, issue 33 finding 6).
- :class:`GuardedPositions`: every call bounded by :data:`POSITIONS_TIMEOUT_S`
  (its client tries once: no redis-py retries hidden inside, finding 2); after
  a connection-class failure the store is skipped for :data:`POSITIONS_SKIP_S`,
  so a silent Redis costs one request that deadline, not every request. While
  it is skipped, reads go to the primary (always correct) and the positions of
  this process's writes are kept here and written to Redis once it answers, so
  other web processes learn them too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import redis
import redis.asyncio as aredis

from storage.replicas import PRIMARY_ONLY, WritePositions

_log = logging.getLogger(__name__)

#: Seconds one call to the positions store may take (a GET answers in a millisecond).
POSITIONS_TIMEOUT_S = 0.5
#: Seconds the store is skipped after a connection-class failure or a stall.
POSITIONS_SKIP_S = 5.0
#: Writes whose positions wait here for Redis to answer again (the oldest go first).
PENDING_MAX = 10_000

T = TypeVar("T")


class PositionsSkipped(Exception):
    """The positions store failed now, or less than POSITIONS_SKIP_S ago (not asked)."""

    #: Expected while the store is skipped: storage.replicas routes to the primary quietly.
    expected = True


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
        self._pins = f"{namespace}:ryw-primary:"

    async def get(self, user_id: int) -> int | None:
        pinned, value = await self._client.mget(
            f"{self._pins}{user_id}", f"{self._prefix}{user_id}"
        )
        if pinned is not None:
            return PRIMARY_ONLY
        return None if value is None else int(value)

    async def put(self, user_id: int, position: int, ttl_s: float) -> None:
        await self._client.eval(
            self._PUT, 1, f"{self._prefix}{user_id}", str(position), str(int(ttl_s * 1000))
        )

    async def pin(self, user_id: int, ttl_s: float) -> None:
        await self._client.set(f"{self._pins}{user_id}", 1, px=int(ttl_s * 1000))

    async def aclose(self) -> None:
        await self._client.aclose()


class GuardedPositions:
    """``store`` with each call bounded, skipped for a while after it fails (module doc)."""

    def __init__(
        self,
        store: WritePositions,
        *,
        timeout_s: float = POSITIONS_TIMEOUT_S,
        skip_s: float = POSITIONS_SKIP_S,
        clock: Callable[[], float] = time.monotonic,
        reconnect: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._store = store
        # Drops the store's connections after a failure: with Sentinels an idle one may
        # lead to an old master (frozen, or thawed and not yet demoted).
        self._reconnect = reconnect
        self._timeout_s = timeout_s
        self._skip_s = skip_s
        self._clock = clock
        self._skip_until = 0.0
        # Positions and pins of this process's writes that Redis has not taken yet.
        self._pending: dict[int, tuple[int, float, float]] = {}  # user: position, ttl, until
        self._pending_pins: dict[int, tuple[float, float]] = {}  # user: ttl, until

    @property
    def skipping(self) -> bool:
        """Whether the store is being skipped now (``/metrics``)."""
        return self._clock() < self._skip_until

    async def get(self, user_id: int) -> int | None:
        now = self._clock()
        pin = self._pending_pins.get(user_id)
        if pin is not None and pin[1] > now:
            return PRIMARY_ONLY
        found = await self._call(lambda: self._store.get(user_id))
        pending = self._pending.get(user_id)
        if pending is not None and pending[2] > now:
            return max(found or 0, pending[0])
        return found

    async def put(self, user_id: int, position: int, ttl_s: float) -> None:
        known = self._pending.get(user_id)
        kept = max(position, known[0] if known else 0)
        self._pending[user_id] = (kept, ttl_s, self._clock() + ttl_s)
        self._trim()
        await self._call(lambda: self._store.put(user_id, kept, ttl_s))
        self._pending.pop(user_id, None)

    async def pin(self, user_id: int, ttl_s: float) -> None:
        self._pending_pins[user_id] = (ttl_s, self._clock() + ttl_s)
        self._trim()
        await self._call(lambda: self._store.pin(user_id, ttl_s))
        self._pending_pins.pop(user_id, None)

    async def flush(self) -> None:
        """Write what waits here to the store (the replica health loop calls this each
        measure, skipping or not: it is off the request path, and each call is bounded);
        stops at the first failure, the rest waits for the next call. Until then another
        web process may miss these writes' positions: the shorter the better."""
        if not self._pending and not self._pending_pins:
            return
        now = self._clock()
        for user_id, (_, until) in list(self._pending_pins.items()):
            if until > now:
                await self._call(lambda u=user_id, t=until - now: self._store.pin(u, t), True)  # type: ignore[misc]
            self._pending_pins.pop(user_id, None)
        for user_id, (position, _, until) in list(self._pending.items()):
            if until > now:
                await self._call(
                    lambda u=user_id, p=position, t=until - now: self._store.put(u, p, t),  # type: ignore[misc]
                    True,
                )
            self._pending.pop(user_id, None)

    async def aclose(self) -> None:
        closer = getattr(self._store, "aclose", None)
        if closer is not None:
            await closer()

    async def _call(self, call: Callable[[], Awaitable[T]], background: bool = False) -> T:
        if not background and self._clock() < self._skip_until:
            raise PositionsSkipped(f"the positions store failed; skipped for {self._skip_s:g} s")
        try:
            return await asyncio.wait_for(call(), self._timeout_s)
        except (redis.ConnectionError, redis.TimeoutError, OSError, TimeoutError) as ex:
            if self._skip_until <= self._clock():
                _log.warning(
                    "the write positions store (Redis) failed (%s): reads go to the primary "
                    "and it is not asked for %g s",
                    type(ex).__name__,
                    self._skip_s,
                )
            self._skip_until = self._clock() + self._skip_s
            if self._reconnect is not None:
                with contextlib.suppress(Exception):
                    await self._reconnect()
            # Kept here meanwhile (a put or a pin): the caller has nothing more to do.
            raise PositionsSkipped(f"the positions store failed: {type(ex).__name__}") from ex

    def _trim(self) -> None:
        for pending in (self._pending, self._pending_pins):
            while len(pending) > PENDING_MAX:
                del pending[next(iter(pending))]
