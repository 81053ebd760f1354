"""Failed sign-ins per username and per client address: the sign-in throttle's SQL.

One row of ``oauth_login_failures`` per failed (or still running) attempt.
An attempt is *reserved* before its password is checked: inside one short
transaction that holds an advisory lock on the username and on the address,
the caller reads the recent failures and, when no delay applies, inserts the
attempt's row at once. Concurrent attempts, in this process or in another
web process on the same database, queue on those locks and each sees every
earlier reservation, so no more attempts are checked than the policy allows.
The row then stays as the failure, or goes with the username's other rows
on success.

The counts can also be read without the locks (:func:`recent_failures`
outside a transaction): an attempt that is already refused needs no lock,
since nothing it does changes the count.

Every function takes a connection so the caller owns the transaction.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from psycopg import AsyncConnection


@dataclass(frozen=True)
class FailureCounts:
    """Recent failed sign-ins for one username and one address."""

    username_failures: int
    username_last: datetime | None
    address_failures: int
    address_last: datetime | None


#: ``pg_advisory_xact_lock(class, object)`` classes of the throttle's locks;
#: the object is :func:`_lock_object` of the username or the address. The
#: two-int form keeps them out of the single-bigint key space that the
#: idempotency locks (``storage.memories``) and the migration lock share, and
#: classes of their own keep them off the named locks of class ``0x4F53_4F4E``
#: (``ACCOUNT_BOOTSTRAP_LOCK``, ``IMPORT_LOCK``, ...), whose objects are small
#: numbers that a hash could hit.
USERNAME_LOCK_CLASS = 0x4F53_4C55  # "OSLU"
ADDRESS_LOCK_CLASS = 0x4F53_4C41  # "OSLA"


def _lock_object(value: str) -> int:
    # A stable signed 32-bit hash, the same in every process (Python's hash()
    # is salted). Two values that collide only share a lock: slower, never wrong.
    digest = hashlib.blake2b(value.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


def username_lock(username: str) -> tuple[int, int]:
    """The ``(class, object)`` advisory-lock key of a username's throttle."""
    return USERNAME_LOCK_CLASS, _lock_object(username)


def address_lock(address: str) -> tuple[int, int]:
    """The ``(class, object)`` advisory-lock key of a client address's throttle."""
    return ADDRESS_LOCK_CLASS, _lock_object(address)


async def lock(conn: AsyncConnection, username: str, address: str) -> None:
    """Hold the username's and the address's throttle until the transaction ends.

    Must run inside ``conn.transaction()``. Every attempt takes the username
    first and the address second, so two attempts cannot deadlock.
    """
    for key in (username_lock(username), address_lock(address)):
        await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", key)


async def recent_failures(
    conn: AsyncConnection, username: str, address: str, since: datetime
) -> FailureCounts:
    cur = await conn.execute(
        """
        SELECT
            (SELECT count(*) FROM oauth_login_failures
             WHERE username = %s AND failed_at > %s),
            (SELECT max(failed_at) FROM oauth_login_failures
             WHERE username = %s AND failed_at > %s),
            (SELECT count(*) FROM oauth_login_failures
             WHERE address = %s AND failed_at > %s),
            (SELECT max(failed_at) FROM oauth_login_failures
             WHERE address = %s AND failed_at > %s)
        """,
        (username, since, username, since, address, since, address, since),
    )
    row = await cur.fetchone()
    assert row is not None
    return FailureCounts(int(row[0]), row[1], int(row[2]), row[3])


async def reserve(conn: AsyncConnection, username: str, address: str, at: datetime) -> int:
    """Record an attempt as a failure before its password is checked; its id."""
    cur = await conn.execute(
        "INSERT INTO oauth_login_failures (username, address, failed_at) VALUES (%s, %s, %s) "
        "RETURNING id",
        (username, address, at),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def confirm_failure(
    conn: AsyncConnection, attempt_id: int, username: str, address: str, at: datetime
) -> None:
    """The reserved attempt failed at ``at`` (the delay counts from then).

    The row is written again if a concurrent success cleared it meanwhile:
    a failure is never forgotten because another attempt succeeded.
    """
    await conn.execute(
        "INSERT INTO oauth_login_failures (id, username, address, failed_at) "
        "VALUES (%s, %s, %s, %s) "
        "ON CONFLICT (id) DO UPDATE SET failed_at = EXCLUDED.failed_at",
        (attempt_id, username, address, at),
    )


async def clear_username(conn: AsyncConnection, username: str) -> None:
    """Forget the username's failures (a success), its own reservation included."""
    await conn.execute("DELETE FROM oauth_login_failures WHERE username = %s", (username,))
