"""The JWT signing keys every web process shares, kept in PostgreSQL (SUPPLEMENT §8).

A :class:`KeyStore` holds an in-memory snapshot ("ring") of the usable keys:
the active ones and those retired within a grace period. The newest active
key signs; every usable key verifies and is published in the JWKS. A
rotation inserts a new key and retires the others, which keep verifying for
``access_token_ttl_s`` plus margins, so nobody is logged out by a rotation
or a restart.

Database reads happen at :meth:`KeyStore.load`, on :meth:`~KeyStore.rotate`,
when the ring is older than ``max_age_s`` and, throttled, when a token names
an unknown kid (another process may have rotated). A request whose kid is
known does no database work.

Private keys are stored in clear in ``signing_keys.private_jwk``: protect the
database (and its backups) accordingly.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from joserfc.jwk import KeySet, RSAKey
from psycopg_pool import AsyncConnectionPool

from storage import keys as key_rows
from storage.keys import SigningKeyRow

logger = logging.getLogger(__name__)

#: The only signing algorithm issued and accepted.
ALGORITHM = "RS256"
#: RSA modulus size of generated keys, in bits.
RSA_BITS = 2048
#: Least time between two database reloads caused by unknown kids, in seconds.
DEFAULT_RELOAD_INTERVAL_S = 5.0
#: Age after which the ring is re-read on the next use, in seconds.
DEFAULT_MAX_AGE_S = 300.0
#: Added to a retired key's grace period, in seconds: verification leeway and
#: clock differences between hosts.
_RETIRED_MARGIN_S = 120.0

# Only kids of this shape can trigger a reload; anything else is simply unknown.
_KID_SHAPE = re.compile(r"[A-Za-z0-9_.~-]{1,128}")


@dataclass(frozen=True)
class _Ring:
    """One immutable snapshot of the usable keys; replaced whole, never mutated."""

    keys: Mapping[str, RSAKey]
    signing: RSAKey
    jwks: tuple[dict[str, Any], ...]
    loaded_at: float


class KeyStore:
    """Signing and verification keys shared through PostgreSQL.

    Construct once per process with the pool and the access-token lifetime,
    then ``await load()`` before serving.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool,
        *,
        access_token_ttl_s: float = 3600,
        reload_interval_s: float = DEFAULT_RELOAD_INTERVAL_S,
        max_age_s: float = DEFAULT_MAX_AGE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pool = pool
        self._reload_interval_s = reload_interval_s
        self._max_age_s = max_age_s
        # A process that has not yet seen a rotation keeps signing with the old
        # key for up to max_age_s, and its tokens live access_token_ttl_s.
        self.keep_retired_s = access_token_ttl_s + max_age_s + _RETIRED_MARGIN_S
        self._clock = clock
        self._ring: _Ring | None = None
        self._last_attempt = float("-inf")
        self._lock = asyncio.Lock()

    @property
    def pool(self) -> AsyncConnectionPool:
        """The pool the keys live in (the bearer check reads the revocation list from it)."""
        return self._pool

    # -- loading -----------------------------------------------------------

    async def load(self) -> None:
        """Read the usable keys, creating the first key if there is no active one.

        Calling it again re-reads at once (errors propagate, unlike the
        automatic re-reads).

        Safe to run in many processes at once: creation happens under a
        transaction-level advisory lock, after reading again.
        """
        async with self._lock:
            await self._sync()

    async def refresh_if_stale(self) -> None:
        """Re-read the keys if the snapshot is older than ``max_age_s``.

        Call before signing (token endpoint) and before serving the JWKS, so a
        rotation made by another process is followed within ``max_age_s``.
        A failed re-read is logged and the current snapshot kept (retried at
        most once per ``reload_interval_s``).
        """
        if not self._stale() or self._throttled() or self._lock.locked():
            return
        async with self._lock:
            if self._stale() and not self._throttled():
                await self._sync_quietly()

    async def rotate(self) -> str:
        """Add a new signing key and retire the others; returns the new kid.

        The retired keys keep verifying, and stay in the JWKS, for
        :attr:`keep_retired_s` seconds.
        """
        new_key = await asyncio.to_thread(_generate_key)
        async with self._lock:
            async with self._pool.connection() as conn, conn.transaction():
                await key_rows.lock_signing_keys(conn)
                await key_rows.insert_key(conn, _kid(new_key), ALGORITHM, _private_jwk(new_key))
                await key_rows.retire_other_keys(conn, _kid(new_key))
            await self._sync()
        return _kid(new_key)

    # -- use -----------------------------------------------------------------

    def signing_key(self) -> RSAKey:
        """The newest active key (private); its ``kid`` goes in the JWT header."""
        return self._require_ring().signing

    def get(self, kid: str) -> RSAKey | None:
        """The usable key with this kid from memory only; no database access."""
        return self._require_ring().keys.get(kid)

    async def find(self, kid: str) -> RSAKey | None:
        """The usable key with this kid, re-reading the database if needed.

        An unknown kid causes at most one database read per
        ``reload_interval_s`` seconds across all callers, so a flood of random
        kids costs nothing; a reload failure counts as "unknown" (logged).
        """
        await self.refresh_if_stale()
        key = self.get(kid)
        if key is not None or not _KID_SHAPE.fullmatch(kid) or self._throttled():
            return key
        async with self._lock:
            key = self.get(kid)
            if key is None and not self._throttled():
                await self._sync_quietly()
                key = self.get(kid)
        return key

    def jwks(self) -> dict[str, Any]:
        """The public JWK Set (RFC 7517 §5): every usable key, signing key first."""
        return {"keys": [dict(jwk) for jwk in self._require_ring().jwks]}

    @property
    def loaded(self) -> bool:
        return self._ring is not None

    # -- internals -----------------------------------------------------------

    def _require_ring(self) -> _Ring:
        if self._ring is None:
            raise RuntimeError("KeyStore.load() must run before the key store is used")
        return self._ring

    def _stale(self) -> bool:
        return self._clock() - self._require_ring().loaded_at > self._max_age_s

    def _throttled(self) -> bool:
        # Also spaces out retries while the database is unreachable.
        return self._clock() - self._last_attempt < self._reload_interval_s

    async def _sync_quietly(self) -> None:
        try:
            await self._sync()
        except Exception:
            logger.exception("re-reading the signing keys failed; keeping the current ones")

    async def _sync(self) -> None:
        """Replace the ring from the database; the caller holds ``self._lock``."""
        self._last_attempt = self._clock()
        async with self._pool.connection() as conn:
            rows = await key_rows.list_usable_keys(conn, self.keep_retired_s)
        if _active(rows) is None:
            # Generate outside the lock (it takes CPU time); wasted if another
            # process wins the race, which is rare and harmless.
            new_key = await asyncio.to_thread(_generate_key)
            async with self._pool.connection() as conn, conn.transaction():
                await key_rows.lock_signing_keys(conn)
                rows = await key_rows.list_usable_keys(conn, self.keep_retired_s)
                if _active(rows) is None:
                    await key_rows.insert_key(conn, _kid(new_key), ALGORITHM, _private_jwk(new_key))
                    logger.info("created signing key %s", _kid(new_key))
                    rows = await key_rows.list_usable_keys(conn, self.keep_retired_s)
        self._ring = self._build_ring(rows)

    def _build_ring(self, rows: list[SigningKeyRow]) -> _Ring:
        previous = self._ring.keys if self._ring is not None else {}
        keys: dict[str, RSAKey] = {}
        signing: RSAKey | None = None
        for row in rows:  # newest first
            if row.algorithm != ALGORITHM:
                logger.warning("ignoring signing key %s: algorithm %s", row.kid, row.algorithm)
                continue
            # Parsing a private key is slow (consistency checks): reuse known ones.
            key = previous.get(row.kid)
            if key is None:
                key = _import_key(row)
            if key is None:
                continue
            keys[row.kid] = key
            if signing is None and row.retired_at is None:
                signing = key
        if signing is None:
            raise RuntimeError("no active signing key could be loaded")
        ordered = [signing] + [k for kid, k in keys.items() if kid != _kid(signing)]
        public = KeySet([RSAKey.import_key(k.as_dict(private=False)) for k in ordered])
        jwks = tuple(
            {**jwk, "alg": ALGORITHM, "use": "sig"} for jwk in public.as_dict(private=False)["keys"]
        )
        return _Ring(MappingProxyType(keys), signing, jwks, self._clock())


def _active(rows: list[SigningKeyRow]) -> SigningKeyRow | None:
    return next((r for r in rows if r.retired_at is None and r.algorithm == ALGORITHM), None)


def _generate_key() -> RSAKey:
    return RSAKey.generate_key(
        RSA_BITS, parameters={"alg": ALGORITHM, "use": "sig"}, private=True, auto_kid=True
    )


def _kid(key: RSAKey) -> str:
    kid = key.kid
    assert kid is not None
    return kid


def _private_jwk(key: RSAKey) -> dict[str, Any]:
    return dict(key.as_dict(private=True))


def _import_key(row: SigningKeyRow) -> RSAKey | None:
    try:
        key = RSAKey.import_key({**row.private_jwk, "kid": row.kid})
    except Exception:
        logger.exception("signing key %s cannot be read; ignoring it", row.kid)
        return None
    if not key.is_private:
        logger.warning("signing key %s has no private part; ignoring it", row.kid)
        return None
    return key
