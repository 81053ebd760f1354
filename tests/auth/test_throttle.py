"""Sign-in throttling per username and per address; failures logged without the password."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from auth.accounts import add_user
from auth.throttle import LoginGuard, ThrottlePolicy
from storage import login_attempts
from tests.auth.oauth_flow import PASSWORD, oauth_clean, rows

__all__ = ["oauth_clean"]

POLICY = ThrottlePolicy(
    window_s=600, free_per_username=3, free_per_address=5, base_delay_s=10, max_delay_s=60
)


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
async def guard(pool: Any, oauth_clean: str) -> tuple[LoginGuard, Clock, int]:
    user_id = await add_user(pool, "alice", PASSWORD)
    clock = Clock()
    return LoginGuard(pool, POLICY, clock), clock, user_id


def test_delays_double_up_to_the_cap() -> None:
    assert [POLICY.delay(n, 3) for n in range(2, 8)] == [0, 10, 20, 40, 60, 60]


async def test_username_is_throttled_after_free_failures(guard: Any) -> None:
    login, clock, user_id = guard
    for _ in range(3):
        assert (await login.sign_in("alice", "wrong password", "198.51.100.1")).user_id is None
    # Even the right password is not checked now: the answer is "wait".
    blocked = await login.sign_in("alice", PASSWORD, "198.51.100.2")
    assert blocked.user_id is None and blocked.retry_after_s == 10
    clock.advance(10)
    assert (await login.sign_in("alice", PASSWORD, "198.51.100.2")).user_id == user_id
    # Success clears the username's failures.
    assert (await login.sign_in("Alice", "wrong password", "198.51.100.3")).retry_after_s is None


async def test_unknown_usernames_are_throttled_the_same_way(guard: Any) -> None:
    login, _clock, _ = guard
    for _ in range(3):
        assert (await login.sign_in("mallory", "whatever1", "198.51.100.1")).retry_after_s is None
    assert (await login.sign_in("mallory", "whatever1", "198.51.100.9")).retry_after_s == 10


async def test_address_is_throttled_across_usernames(guard: Any) -> None:
    login, clock, user_id = guard
    for n in range(5):
        await login.sign_in(f"user{n}", "wrong password", "198.51.100.7")
    blocked = await login.sign_in("alice", PASSWORD, "198.51.100.7")
    assert blocked.retry_after_s == 10
    # Another address is not affected.
    assert (await login.sign_in("alice", PASSWORD, "198.51.100.8")).user_id == user_id
    clock.advance(601)  # the window forgets
    assert (await login.sign_in("alice", PASSWORD, "198.51.100.7")).user_id == user_id


async def test_each_failure_is_logged_without_the_password(
    guard: Any, caplog: pytest.LogCaptureFixture
) -> None:
    login, _clock, _ = guard
    caplog.set_level(logging.INFO, logger="ownsona.auth.login")
    await login.sign_in("alice", "hunter2-secret", "198.51.100.1")
    await login.sign_in("ghost\nINFO forged line", "hunter3-secret", "198.51.100.1")
    failures = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert len(failures) == 2
    assert "'alice'" in failures[0] and "198.51.100.1" in failures[0]
    assert "\n" not in failures[1]
    assert all("hunter" not in r.getMessage() for r in caplog.records)


async def test_concurrent_attempts_from_one_address_check_at_most_its_free_number(
    guard: Any, caplog: pytest.LogCaptureFixture
) -> None:
    login, _clock, _ = guard
    caplog.set_level(logging.INFO, logger="ownsona.auth.login")
    outcomes = await asyncio.gather(
        *(login.sign_in(f"user{n}", "wrong password", "198.51.100.7") for n in range(20))
    )
    # Every username is fresh; only the address's count (5 free) can refuse them.
    assert sum(o.retry_after_s is None for o in outcomes) == 5
    assert {o.retry_after_s for o in outcomes} == {None, 10}
    assert sum("sign-in failed" in r.getMessage() for r in caplog.records) == 5


@contextlib.asynccontextmanager
async def holding_throttle_lock(dsn: str, username: str, address: str) -> AsyncIterator[None]:
    """Another connection (not the guard's pool) holds the username's and address's lock."""
    async with (
        await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn,
        conn.transaction(),
    ):
        await login_attempts.lock(conn, username, address)
        yield


async def test_a_throttled_username_answers_without_waiting_for_its_lock(
    guard: Any, oauth_clean: str
) -> None:
    login, _clock, _ = guard
    for _ in range(3):
        await login.sign_in("alice", "wrong password", "198.51.100.1")
    # A burst larger than the pool: had each attempt queued on the lock, holding a
    # pool connection, none would answer until the lock is released.
    async with holding_throttle_lock(oauth_clean, "alice", "198.51.100.1"):
        outcomes = await asyncio.wait_for(
            asyncio.gather(
                *(login.sign_in("alice", PASSWORD, f"198.51.100.{10 + n}") for n in range(30))
            ),
            timeout=10,
        )
    assert {o.retry_after_s for o in outcomes} == {10}
    assert rows(oauth_clean, "SELECT count(*) FROM oauth_login_failures")[0][0] == 3


async def test_an_attempt_below_the_limit_queues_on_the_username_lock(
    guard: Any, oauth_clean: str
) -> None:
    login, _clock, _ = guard
    lock_class, lock_object = login_attempts.username_lock("alice")
    async with holding_throttle_lock(oauth_clean, "alice", "198.51.100.1"):
        attempt = asyncio.create_task(login.sign_in("Alice", "wrong password", "198.51.100.2"))
        # It waits on the username's lock in the two-int (class, object) space
        # (objsubid 2), apart from the single-bigint idempotency and migration locks.
        deadline = time.monotonic() + 10
        while not rows(
            oauth_clean,
            "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            " AND classid::bigint = %s AND objid::bigint = %s AND objsubid = 2",
            lock_class & 0xFFFF_FFFF,
            lock_object & 0xFFFF_FFFF,
        ):
            assert time.monotonic() < deadline, "the attempt did not wait for the username lock"
            assert not attempt.done(), attempt
            await asyncio.sleep(0.02)
        assert not attempt.done()
    outcome = await asyncio.wait_for(attempt, timeout=30)
    assert outcome.user_id is None and outcome.retry_after_s is None
    assert rows(oauth_clean, "SELECT count(*) FROM oauth_login_failures")[0][0] == 1
