"""Opaque secrets: client secrets, codes, refresh tokens, session ids.

Each is 256 bits from :mod:`secrets`, handed out once and stored only as
its SHA-256 digest. A fast hash is enough for values this random (nothing
to brute-force), and it lets the database find a row by its digest.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import TypeGuard

#: Bytes of randomness in every opaque secret.
SECRET_BYTES = 32
#: Longer presented values are refused unhashed.
MAX_PRESENTED_CHARS = 512


def new_secret() -> str:
    """43 URL-safe characters, 256 bits."""
    return secrets.token_urlsafe(SECRET_BYTES)


def digest(value: str) -> str:
    """The stored form of a secret: lower-case hex SHA-256."""
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def presentable(value: object) -> TypeGuard[str]:
    """Whether a presented value is worth looking up at all."""
    return isinstance(value, str) and 0 < len(value) <= MAX_PRESENTED_CHARS
