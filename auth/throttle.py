"""Password sign-in with throttling, without user enumeration (SUPPLEMENT §8).

- Unknown username, disabled account and wrong password get the same
  answer and cost the same argon2 verification (``auth.accounts``).
- Failures are recorded per username (as typed, normalised) and per client
  address, in PostgreSQL so every web process sees them. Within
  :attr:`ThrottlePolicy.window_s`, the first ``free_per_username`` failures
  for a username (``free_per_address`` for an address) cost nothing more;
  after that each further attempt must wait ``base_delay_s``, doubling per
  failure up to ``max_delay_s``, counted from the latest failure. A refused
  attempt is answered before the password is checked, so it costs no
  argon2 time and reveals nothing.
- The count is atomic and shared: an attempt is reserved (recorded as a
  failure) under a database lock on its username and address *before* its
  password is checked (``storage.login_attempts``). Concurrent attempts, in
  one process or several, therefore count each other, and at most the free
  number of them (then one per delay) ever reach argon2.
- A refused attempt takes no lock: the counts are read once without it, and
  only an attempt they would let through locks and reads them again. A
  burst against a throttled username is then one plain read per attempt,
  not a queue of transactions holding pool connections while they wait
  (which also delayed unrelated queries). The unlocked read can only be
  stale towards "refuse" by a concurrent success that just cleared the
  username: that attempt is answered "wait" as it would have been a moment
  earlier.
- Unknown usernames are throttled exactly like real ones, so throttling
  does not reveal which accounts exist either.
- Every failure is logged with the username (repr, so it cannot forge log
  lines) and the address; never the password.
- A success clears the username's failures (not the address's).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from psycopg_pool import AsyncConnectionPool

from auth.accounts import authenticate_password
from auth.errors import AccountError
from storage import login_attempts, oauth

logger = logging.getLogger("ownsona.auth.login")

_MAX_KEY_CHARS = 128


@dataclass(frozen=True)
class ThrottlePolicy:
    #: Failures older than this many seconds are forgotten.
    window_s: float = 15 * 60
    #: Failures per username within the window before delays start.
    free_per_username: int = 5
    #: Failures per client address within the window before delays start.
    free_per_address: int = 20
    #: The first delay, in seconds; it doubles with every further failure.
    base_delay_s: float = 1.0
    #: The longest delay, in seconds.
    max_delay_s: float = 300.0

    def delay(self, failures: int, free: int) -> float:
        """Seconds an attempt must wait after the latest of ``failures`` failures."""
        if failures < free:
            return 0.0
        return min(self.base_delay_s * 2.0 ** (failures - free), self.max_delay_s)


@dataclass(frozen=True)
class Reservation:
    """The throttle's answer before the password is checked."""

    #: The reserved attempt (recorded as a failure until it succeeds), or None when refused.
    attempt_id: int | None
    #: Seconds left to wait when refused; 0 when reserved.
    wait_s: float = 0.0


@dataclass(frozen=True)
class SignIn:
    """The outcome of a sign-in attempt: at most one of the fields is set (none: refused)."""

    user_id: int | None = None
    #: Whole seconds to wait before trying again (throttled; the password was not checked).
    retry_after_s: int | None = None
    #: The right password of a disabled account: what to tell its owner.
    disabled: str | None = None


def _utcnow() -> datetime:
    return datetime.now(UTC)


class LoginGuard:
    """Checks passwords behind the throttle."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        policy: ThrottlePolicy | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._pool = pool
        self.policy = policy or ThrottlePolicy()
        self._clock = clock or _utcnow

    async def sign_in(self, username: str, password: str, address: str) -> SignIn:
        key = _username_key(username)
        address = address[:_MAX_KEY_CHARS] or "unknown"
        reserved = await self._reserve(key, address)
        if reserved.attempt_id is None:
            logger.warning(
                "sign-in throttled for username %r from %s (%.0fs left)",
                key,
                address,
                reserved.wait_s,
            )
            return SignIn(retry_after_s=max(1, math.ceil(reserved.wait_s)))
        # An exception from here on (a dropped client, a lost database) leaves the
        # reservation standing as a failure: an attempt is never free for the attacker.
        try:
            user_id = await authenticate_password(self._pool, username, password)
        except AccountError as ex:
            # Raised only for the right password of a disabled account; its
            # reservation stays recorded as a failure, like any refusal.
            if ex.problem != "account_disabled":
                raise
            return SignIn(disabled=ex.message)
        async with self._pool.connection() as conn:
            if user_id is None:
                await login_attempts.confirm_failure(
                    conn, reserved.attempt_id, key, address, self._clock()
                )
                await oauth.prune_expired(conn, self.policy.window_s)
            else:
                await login_attempts.clear_username(conn, key)
        if user_id is None:
            logger.warning("sign-in failed for username %r from %s", key, address)
            return SignIn()
        logger.info("sign-in succeeded for username %r from %s", key, address)
        return SignIn(user_id=user_id)

    async def _reserve(self, key: str, address: str) -> Reservation:
        """Reserve the attempt, or say how long it must wait (nothing reserved).

        Reading the count and recording the attempt happen under one lock, so
        two attempts can never both see the count from before the other. An
        attempt the unlocked count already refuses does not wait for the lock.
        """
        now = self._clock()
        since = now - timedelta(seconds=self.policy.window_s)
        async with self._pool.connection() as conn:
            # Autocommit: one round trip, no transaction, no lock.
            wait = self._wait(await login_attempts.recent_failures(conn, key, address, since), now)
            if wait > 0:
                return Reservation(attempt_id=None, wait_s=wait)
            async with conn.transaction():
                await login_attempts.lock(conn, key, address)
                counts = await login_attempts.recent_failures(conn, key, address, since)
                wait = self._wait(counts, now)
                if wait > 0:
                    return Reservation(attempt_id=None, wait_s=wait)
                return Reservation(await login_attempts.reserve(conn, key, address, now))

    def _wait(self, counts: login_attempts.FailureCounts, now: datetime) -> float:
        wait = 0.0
        for failures, last, free in (
            (counts.username_failures, counts.username_last, self.policy.free_per_username),
            (counts.address_failures, counts.address_last, self.policy.free_per_address),
        ):
            delay = self.policy.delay(failures, free)
            if delay and last is not None:
                wait = max(wait, (last + timedelta(seconds=delay) - now).total_seconds())
        return wait


def _username_key(username: str) -> str:
    return username.strip().lower()[:_MAX_KEY_CHARS]
