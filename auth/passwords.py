"""Password hashing: argon2id with argon2-cffi's defaults (RFC 9106 low-memory profile).

These functions are CPU-bound (tens of milliseconds, 64 MiB): async callers
run them in a worker thread (``asyncio.to_thread``) so the event loop keeps
serving. ``auth.accounts`` does.
"""

from __future__ import annotations

import functools
import secrets
import threading

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

# One hasher, immutable after construction; its parameters are encoded in every
# hash, so raising them later makes ``needs_rehash`` true for older hashes.
_HASHER = PasswordHasher()

#: At most this many hash computations run at once, whatever the number of
#: threads: each one takes 64 MiB, and a login flood must not exhaust memory.
MAX_CONCURRENT_HASHES = 4
_SLOTS = threading.BoundedSemaphore(MAX_CONCURRENT_HASHES)


def hash_password(password: str) -> str:
    """An argon2id PHC string (``$argon2id$v=19$m=...``) with a fresh random salt."""
    with _SLOTS:
        return _HASHER.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    """Whether ``password`` matches; False for a wrong password or a malformed hash.

    The comparison happens inside libargon2 in constant time, and the cost is
    dominated by the hash itself, which does not depend on the password.
    """
    try:
        with _SLOTS:
            return _HASHER.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        # VerifyMismatchError is a VerificationError.
        return False


def needs_rehash(password_hash: str) -> bool:
    """Whether the hash was made with other parameters than today's."""
    try:
        return _HASHER.check_needs_rehash(password_hash)
    except InvalidHashError:
        return True


@functools.cache
def _dummy_hash() -> str:
    # Computed on first use, not at import: nothing does work at import time.
    return hash_password(secrets.token_urlsafe(32))


def dummy_verify(password: str = "") -> None:
    """Spend what a real verification costs, for usernames that do not exist.

    Without it, "no such user" answers faster than "wrong password" and
    reveals which usernames exist.
    """
    verify_password(_dummy_hash(), password)
