"""``Mcp-Session-Id`` values: issued signed, recognised without state, ended for every process.

Streamable HTTP, "Session Management": a request with a session id the
server did not issue, or one that was ended with DELETE, answers 404.
Deciding that is access control, so it lives in ``auth`` beside the keys it
signs with; the MCP transport (``api.mcp.resource``) only asks.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable

from joserfc.jwk import RSAKey
from psycopg_pool import AsyncConnectionPool

from auth.keys import KeyStore
from storage import sessions

#: How long a session id is accepted after ``initialize`` issued it (30 days).
#: A client that used one for that long is told 404 and starts a new session.
SESSION_LIFETIME_S = 30 * 86_400
#: The feature mark of a session whose client offered MCP Apps (``io.modelcontextprotocol/ui``).
_APPS = "a"
#: How many ended session ids one process keeps in memory to skip their
#: lookup (about 100 bytes each); PostgreSQL holds them all.
_ENDED_SESSIONS = 10_000


class SessionBook:
    """Issues and recognises ``Mcp-Session-Id`` values without storing open sessions.

    An id is ``kid.issued.nonce.mac``, or ``kid.issued.nonce.a.mac`` for a
    client that offered MCP Apps at ``initialize`` (what it offered there holds
    for the session, and the id is all a later request carries of it): the MAC
    covers the user, the issue time (seconds since the epoch), the nonce and
    that mark, and is keyed by a hash of the
    signing key ``kid`` (shared by all web processes through PostgreSQL, kept
    in memory by the key store), so any process can tell our ids from made-up
    ones, one user's id from another's, and a fresh id from one older than
    ``lifetime_s``. Ids signed by a key that has left the key ring, and
    expired ones, are unknown: their clients start a new session, as the spec
    has them do after a 404.

    Ended sessions are rows in PostgreSQL (storage/sessions.py), so every
    web process and every restart refuses them; rows older than the lifetime
    are pruned, since their ids are refused by age anyway. A bounded set of
    ids known to be ended saves this process the lookup for them.
    """

    def __init__(
        self, *, lifetime_s: float = SESSION_LIFETIME_S, clock: Callable[[], float] = time.time
    ) -> None:
        self._lifetime_s = lifetime_s
        self._clock = clock
        self._macs: dict[str, bytes] = {}
        self._ended: OrderedDict[str, None] = OrderedDict()

    def open(self, keystore: KeyStore, user_id: int, *, apps: bool = False) -> str:
        key = keystore.signing_key()
        kid = key.kid or ""
        issued = str(int(self._clock()))
        nonce = secrets.token_urlsafe(18)
        if apps:
            nonce = f"{nonce}.{_APPS}"
        return f"{kid}.{issued}.{nonce}.{self._mac(kid, key, user_id, issued, nonce)}"

    @staticmethod
    def has_apps(session_id: str) -> bool:
        """Whether the session's client offered MCP Apps; ask only of an id ``is_ours`` passed."""
        parts = session_id.split(".")
        return len(parts) == 5 and parts[3] == _APPS

    def is_ours(self, keystore: KeyStore, user_id: int, session_id: str) -> bool:
        """Signed by us for this user and not expired (no I/O; ended or not is another question)."""
        parts = session_id.split(".")
        if len(parts) == 5 and parts[3] == _APPS:
            parts = [parts[0], parts[1], f"{parts[2]}.{parts[3]}", parts[4]]
        if len(parts) != 4:
            return False
        kid, issued, nonce, mac = parts
        if not (issued.isascii() and issued.isdigit() and len(issued) <= 12):
            return False
        if not -60 <= self._clock() - int(issued) <= self._lifetime_s:  # a minute of clock skew
            return False
        key = keystore.get(kid)
        if key is None:
            return False
        return hmac.compare_digest(mac, self._mac(kid, key, user_id, issued, nonce))

    async def is_ended(self, pool: AsyncConnectionPool, session_id: str) -> bool:
        """Whether any process ended it; raises the driver's error when the database fails."""
        if session_id in self._ended:
            return True
        async with pool.connection() as conn:
            ended = await sessions.is_ended(conn, session_id)
        if ended:
            self._remember(session_id)
        return ended

    async def end(self, pool: AsyncConnectionPool, session_id: str, user_id: int) -> bool:
        """End it for every process; False when it was already ended."""
        if session_id in self._ended:
            return False
        async with pool.connection() as conn:
            ended = await sessions.end(conn, session_id, user_id, keep_s=self._lifetime_s + 86_400)
        self._remember(session_id)
        return ended

    def _remember(self, session_id: str) -> None:
        self._ended[session_id] = None
        while len(self._ended) > _ENDED_SESSIONS:
            self._ended.popitem(last=False)

    def _mac(self, kid: str, key: RSAKey, user_id: int, issued: str, nonce: str) -> str:
        secret = self._macs.get(kid)
        if secret is None:
            # A key of its own, derived from the private key's exponent with a
            # purpose label: no JWT verifier can be fooled by a session MAC.
            private = key.as_dict(private=True)["d"]
            assert isinstance(private, str)  # an RSA private exponent: one base64url string
            secret = hashlib.sha256(b"ownsona mcp session id\0" + private.encode()).digest()
            self._macs[kid] = secret
        message = f"{user_id}.{issued}.{nonce}".encode()
        return hmac.new(secret, message, hashlib.sha256).hexdigest()[:32]
