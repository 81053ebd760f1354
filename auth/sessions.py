"""Browser sessions on the authorization pages, and their cookie (SUPPLEMENT §8).

Signing in once lets the next authorization skip the password (consent is
still asked of a client the user has not allowed). The cookie holds a
256-bit random id; the database holds its digest, the user and an absolute
expiry. The cookie is ``HttpOnly``, ``SameSite=Lax`` and, when the public
URL is https, ``Secure`` with the ``__Host-`` prefix (no Domain, Path=/, so
no sibling host can plant or read it). ``Lax`` rather than ``Strict``:
the authorization request arrives as a top-level navigation from the
client's site, and a ``Strict`` cookie would not be sent with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from psycopg_pool import AsyncConnectionPool

from auth.opaque import digest, new_secret, presentable
from storage import oauth

#: How long a sign-in lasts, in seconds.
SESSION_TTL_S = 7 * 24 * 3600


@dataclass(frozen=True)
class CookieNames:
    session: str
    csrf: str


def cookie_names(secure: bool) -> CookieNames:
    """``__Host-`` names need ``Secure``, so plain-http deployments get unprefixed ones."""
    prefix = "__Host-" if secure else ""
    return CookieNames(f"{prefix}ownsona_session", f"{prefix}ownsona_csrf")


@dataclass(frozen=True)
class SignedIn:
    """Who a browser session belongs to."""

    user_id: int
    username: str


class Sessions:
    def __init__(self, pool: AsyncConnectionPool, ttl_s: int = SESSION_TTL_S) -> None:
        self._pool = pool
        self.ttl_s = ttl_s

    async def start(self, user_id: int, replacing: str | None = None) -> str:
        """A new session id for ``user_id`` (the cookie value).

        ``replacing`` is the session the browser held before this sign-in;
        it ends once the new one is stored.
        """
        session_id = new_secret()
        expires = datetime.now(UTC) + timedelta(seconds=self.ttl_s)
        async with self._pool.connection() as conn:
            await oauth.insert_session(conn, digest(session_id), user_id, expires)
        if replacing is not None:
            await self.end(replacing)
        return session_id

    async def user(self, session_id: str | None) -> int | None:
        """The signed-in user of a cookie value, or None."""
        if not presentable(session_id):
            return None
        async with self._pool.connection() as conn:
            return await oauth.session_user(conn, digest(session_id))

    async def account(self, session_id: str | None) -> SignedIn | None:
        """The signed-in account of a cookie value (id and name), or None."""
        if not presentable(session_id):
            return None
        async with self._pool.connection() as conn:
            found = await oauth.session_account(conn, digest(session_id))
        return None if found is None else SignedIn(found[0], found[1])

    async def end(self, session_id: str) -> None:
        if presentable(session_id):
            async with self._pool.connection() as conn:
                await oauth.delete_session(conn, digest(session_id))
