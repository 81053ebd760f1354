"""Access tokens: RS256-signed JWTs (RFC 9068 profile; SUPPLEMENT §8).

Claims: ``iss`` (the issuer), ``aud`` (the resource, ``<public_url>/mcp``),
``sub`` (the user id as a decimal string), ``client_id``, ``scope``, ``iat``,
``exp``, ``jti``. Header: ``alg: RS256``, ``kid``, ``typ: at+jwt``.

Verification trusts nothing in the header but the kid: the algorithm is
fixed to RS256 whatever the header says (``none``, HS256 with the public key
as secret and every other algorithm are refused before any key is touched),
and the key comes only from our own :class:`~auth.keys.KeyStore`.
``exp``, ``iat`` and ``nbf`` are checked with :data:`LEEWAY_S` seconds of
tolerance for clock differences between our hosts.
"""

from __future__ import annotations

import json
import math
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any, NoReturn, NotRequired, TypedDict, TypeGuard, Unpack

from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jws import JWSRegistry

from auth.errors import BearerError
from auth.keys import ALGORITHM, KeyStore
from config.settings import Settings

#: Tolerance on ``exp``/``iat``/``nbf``, in seconds: a token is refused from
#: ``exp + LEEWAY_S`` on. The issuer and every verifier are our own hosts, so
#: only their clock difference needs covering.
LEEWAY_S = 30
#: The ``typ`` header of an access token (RFC 9068 §2.1).
TOKEN_TYPE = "at+jwt"
#: Longer tokens are refused unparsed; ours are about 800 characters.
MAX_TOKEN_CHARS = 4096

_REGISTRY = JWSRegistry(algorithms=[ALGORITHM])
_ACCEPTED_TYPES = frozenset({TOKEN_TYPE, "application/" + TOKEN_TYPE})
_USER_ID = re.compile(r"[1-9][0-9]{0,18}")


@dataclass(frozen=True)
class Principal:
    """Who a verified access token speaks for."""

    user_id: int
    client_id: str
    scopes: frozenset[str]
    jti: str
    #: Expiry, in seconds since the epoch.
    expires_at: int
    #: ``iat``, in seconds since the epoch.
    issued_at: int = 0


def max_lifetime_s(settings: Settings) -> int:
    """The longest ``exp - iat`` accepted: ACCESS_TOKEN_MAX_LIFETIME, never below ACCESS_TOKEN_TTL."""
    return max(settings.access_token_max_lifetime_s, settings.access_token_ttl_s)


@dataclass(frozen=True)
class IssuedToken:
    """A freshly signed access token and the claims its issuer must remember."""

    token: str
    jti: str
    #: ``exp``, in seconds since the epoch.
    expires_at: int
    #: Seconds the token is valid for: the token response's ``expires_in``.
    expires_in: int
    #: ``iat``, in seconds since the epoch.
    issued_at: int = 0


class TokenClaims(TypedDict):
    """Who and what an access token is for (:func:`mint_access_token`'s keywords)."""

    user_id: int
    client_id: str
    scope: str
    #: Seconds the token is valid for; None means the setting.
    ttl_s: NotRequired[int | None]
    #: The issue time, in seconds since the epoch; None means now.
    now: NotRequired[float | None]


def issue_access_token(
    keystore: KeyStore, settings: Settings, **claims: Unpack[TokenClaims]
) -> str:
    """A signed access token for ``user_id``, valid ``ttl_s`` seconds (default: the setting).

    Signs with the key store's current key; a token endpoint should
    ``await keystore.refresh_if_stale()`` first so it follows rotations made
    by other processes.
    """
    return mint_access_token(keystore, settings, **claims).token


def mint_access_token(
    keystore: KeyStore,
    settings: Settings,
    *,
    user_id: int,
    client_id: str,
    scope: str,
    ttl_s: int | None = None,
    now: float | None = None,
) -> IssuedToken:
    """Like :func:`issue_access_token`, also returning the ``jti`` and expiry."""
    lifetime = settings.access_token_ttl_s if ttl_s is None else ttl_s
    if lifetime <= 0:
        raise ValueError("ttl_s must be positive")
    if isinstance(user_id, bool) or user_id <= 0:
        raise ValueError("user_id must be a positive integer")
    issued_at = int(time.time() if now is None else now)
    key = keystore.signing_key()
    header = {"alg": ALGORITHM, "kid": key.kid, "typ": TOKEN_TYPE}
    jti = secrets.token_urlsafe(16)
    claims = {
        "iss": settings.issuer,
        "aud": settings.resource_url,
        "sub": str(user_id),
        "client_id": client_id,
        "scope": scope,
        "iat": issued_at,
        "exp": issued_at + lifetime,
        "jti": jti,
    }
    token = jwt.encode(header, claims, key, registry=_REGISTRY)
    return IssuedToken(token, jti, issued_at + lifetime, lifetime, issued_at)


async def verify_access_token(
    keystore: KeyStore, settings: Settings, token: str, *, now: float | None = None
) -> Principal:
    """The principal of a valid token; :class:`BearerError` 401 ``invalid_token`` otherwise.

    No database access unless the kid is unknown (see :meth:`KeyStore.find`).
    """
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS:
        _refuse("malformed token")
    try:
        obj = jws.extract_compact(token.encode("ascii"), registry=_REGISTRY)
    except (JoseError, UnicodeError, ValueError, TypeError):
        _refuse("malformed token")
    header = obj.headers()
    # The algorithm is ours to choose, never the token's (RFC 8725 §3.1).
    if header.get("alg") != ALGORITHM:
        _refuse("unsupported algorithm")
    if "crit" in header or "b64" in header:
        _refuse("unsupported header")
    typ = header.get("typ")
    if not isinstance(typ, str) or typ.lower() not in _ACCEPTED_TYPES:
        _refuse("not an access token")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        _refuse("missing key id")
    key = await keystore.find(kid)
    if key is None:
        _refuse("unknown signing key")
    try:
        valid = jws.validate_compact(obj, key, registry=_REGISTRY)
    except (JoseError, ValueError, TypeError):
        valid = False
    if not valid:
        _refuse("bad signature")
    try:
        claims = json.loads(obj.payload or b"")
    except ValueError:
        _refuse("malformed claims")
    if not isinstance(claims, dict):
        _refuse("malformed claims")
    return _principal(claims, settings, time.time() if now is None else now)


def _principal(claims: dict[str, Any], settings: Settings, now: float) -> Principal:
    if claims.get("iss") != settings.issuer:
        _refuse("wrong issuer")
    audience = claims.get("aud")
    if isinstance(audience, str):
        audience = [audience]
    if not isinstance(audience, list) or settings.resource_url not in audience:
        _refuse("wrong audience")
    expires = claims.get("exp")
    if not _is_time(expires):
        _refuse("missing expiry")
    if now >= expires + LEEWAY_S:
        _refuse("token expired")
    issued = claims.get("iat")
    if not _is_time(issued):
        _refuse("missing issue time")
    if issued > now + LEEWAY_S:
        _refuse("token issued in the future")
    # A stolen signing key aside, only an old or misconfigured issuer makes such a
    # token; refusing it bounds how long a leaked token can serve.
    if expires - issued > max_lifetime_s(settings):
        _refuse("token lifetime exceeds the maximum")
    not_before = claims.get("nbf")
    if not_before is not None and (not _is_time(not_before) or not_before > now + LEEWAY_S):
        _refuse("token not yet valid")
    subject = claims.get("sub")
    if not isinstance(subject, str) or not _USER_ID.fullmatch(subject):
        _refuse("missing subject")
    client_id = claims.get("client_id")
    if not isinstance(client_id, str) or not client_id:
        _refuse("missing client_id")
    jti = claims.get("jti")
    if not isinstance(jti, str) or not jti:
        _refuse("missing jti")
    scope = claims.get("scope", "")
    if not isinstance(scope, str):
        _refuse("malformed scope")
    return Principal(
        user_id=int(subject),
        client_id=client_id,
        scopes=frozenset(scope.split()),
        jti=jti,
        expires_at=int(expires),
        issued_at=int(issued),
    )


def _is_time(value: object) -> TypeGuard[int | float]:
    """A NumericDate (RFC 7519 §2): a finite JSON number, not a boolean."""
    if isinstance(value, bool):
        return False
    # math.isfinite would overflow on a huge int; only floats can be inf/nan.
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _refuse(reason: str) -> NoReturn:
    raise BearerError(401, "invalid_token", reason)
