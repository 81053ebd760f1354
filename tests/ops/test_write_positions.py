"""Read-your-writes positions shared by every web process through Redis (issue 29).

Two ``RedisPositions`` stand for two web processes on one Redis: what one
records, the other reads; a lower position never replaces a higher one (two
writes of one user may be acknowledged in either order); a position expires.
"""

from __future__ import annotations

import asyncio

import redis.asyncio as aredis

from bootstrap.read_routing import RedisPositions
from tests.conftest import QUEUE_NAMESPACE


async def test_positions_are_shared_only_grow_and_expire(redis_url: str) -> None:
    first = RedisPositions(aredis.Redis.from_url(redis_url), QUEUE_NAMESPACE)
    second = RedisPositions(aredis.Redis.from_url(redis_url), QUEUE_NAMESPACE)
    try:
        assert await second.get(7) is None
        await first.put(7, 5_000_000_000, ttl_s=60)
        assert await second.get(7) == 5_000_000_000
        await second.put(7, 4_000_000_000, ttl_s=60)  # an earlier write acknowledged later
        assert await first.get(7) == 5_000_000_000
        await second.put(7, 6_000_000_000, ttl_s=60)
        assert await first.get(7) == 6_000_000_000
        assert await first.get(8) is None  # per user
        await first.put(9, 1, ttl_s=0.05)
        started = asyncio.get_running_loop().time()
        while await second.get(9) is not None:
            assert asyncio.get_running_loop().time() - started < 5, "the position never expired"
            await asyncio.sleep(0.02)
    finally:
        await first.aclose()
        await second.aclose()
