"""Queue fixtures: the in-process broker, and Redis when one is reachable."""

from __future__ import annotations

import os
import warnings

import pytest
import redis

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")


def redis_available(url: str = REDIS_URL) -> bool:
    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
        return True
    except redis.RedisError:
        return False


@pytest.fixture
def redis_url() -> str:
    """A flushed Redis database; CI must have one (REDIS_URL), locally we skip."""
    if not redis_available():
        if os.environ.get("CI"):
            pytest.fail(f"Redis is required in CI but {REDIS_URL} is unreachable")
        warnings.warn(f"Redis not reachable at {REDIS_URL}: Redis-backed queue tests skipped")
        pytest.skip("no Redis")
    client = redis.Redis.from_url(REDIS_URL)
    client.flushdb()
    yield REDIS_URL
    client.flushdb()
