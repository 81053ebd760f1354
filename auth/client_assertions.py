"""``private_key_jwt`` client assertions (RFC 7523 §2.2, §3; RFC 7521 §4.2; OIDC Core §9).

The client signs a short-lived JWT with a key of its JWK set and sends it as
``client_assertion`` with ``client_assertion_type`` :data:`ASSERTION_TYPE`.
:func:`verify_assertion` checks it; its caller records the ``jti`` so an
assertion is accepted once (RFC 7523 §3 item 7; ``storage.client_documents``).

- Signature: a key of the client's set, an algorithm of :data:`SIGNING_ALGS`
  (asymmetric only: ``none`` and HMAC are never accepted).
- ``iss`` and ``sub``: both the ``client_id`` (RFC 7523 §3 items 1, 2).
- ``aud``: our token endpoint URL, or our issuer identifier (RFC 7523 §3
  item 3 lets the authorization server be named either way; the revision
  draft-ietf-oauth-rfc7523bis recommends the issuer), or the endpoint the
  assertion is presented to.
- ``exp``: required, not passed (with :data:`LEEWAY_S`), and at most
  :data:`MAX_LIFETIME_S` ahead: a long-lived assertion is a replayable
  credential. ``nbf`` and ``iat``, when present, must not be in the future.
- ``jti``: required, at most :data:`MAX_JTI_CHARS` characters.

Every refusal is ``invalid_client`` (RFC 7521 §4.2.1).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from auth.oauth_errors import OAuthError, invalid_client

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
#: The JWS algorithms an assertion may be signed with (advertised in our metadata).
#: Ed25519 is RFC 9864's fully specified name; the polymorphic ``EdDSA`` it deprecates
#: is refused (joserfc warns on it).
SIGNING_ALGS = ("RS256", "PS256", "ES256", "Ed25519")
#: Longest assertion read, in characters.
MAX_ASSERTION_CHARS = 8192
#: Furthest ahead an assertion's ``exp`` may be, in seconds.
MAX_LIFETIME_S = 600
#: Clock skew allowed on ``exp``, ``nbf`` and ``iat``, in seconds.
LEEWAY_S = 30
MAX_JTI_CHARS = 256


@dataclass(frozen=True)
class VerifiedAssertion:
    """What must be recorded of an accepted assertion: its id, until it expires (leeway included)."""

    jti: str
    #: Epoch seconds until which the assertion would be accepted.
    valid_until: float


class UnknownKey(OAuthError):
    """The assertion names a key the set does not have (the client may have rotated its keys)."""


def unverified_issuer(assertion: str) -> str | None:
    """The ``iss`` of an assertion, unverified: which client to look up when no client_id is sent."""
    parts = assertion.split(".")
    if len(parts) != 3 or len(assertion) > MAX_ASSERTION_CHARS:
        return None
    try:
        padded = parts[1] + "=" * (-len(parts[1]) % 4)
        claims = json.loads(base64.urlsafe_b64decode(padded))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None
    issuer = claims.get("iss") if isinstance(claims, dict) else None
    return issuer if isinstance(issuer, str) else None


def verify_assertion(
    assertion: str,
    jwks: dict[str, Any],
    *,
    client_id: str,
    audiences: Collection[str],
    now: float,
) -> VerifiedAssertion:
    """The checked assertion (see the module docstring); :class:`OAuthError` otherwise."""
    if len(assertion) > MAX_ASSERTION_CHARS or assertion.count(".") != 2:
        raise invalid_client("client_assertion is not a signed JWT.")
    try:
        keys = KeySet.import_key_set(jwks)  # type: ignore[arg-type]
    except (JoseError, ValueError, TypeError, KeyError):
        raise invalid_client("The client's JWK set cannot be read.") from None
    try:
        token = jwt.decode(assertion, keys, algorithms=list(SIGNING_ALGS))
    except JoseError as ex:
        if ex.error == "invalid_key_id":
            raise UnknownKey(
                "invalid_client", "client_assertion names a key the client does not publish.", 401
            ) from None
        raise invalid_client(f"client_assertion is not valid ({ex.error}).") from None
    except (ValueError, TypeError):
        raise invalid_client("client_assertion is not valid.") from None
    if token.header.get("alg") not in SIGNING_ALGS:
        raise invalid_client(
            f"client_assertion must be signed with one of {', '.join(SIGNING_ALGS)}."
        )
    return _checked_claims(token.claims, client_id, audiences, now)


def _checked_claims(
    claims: dict[str, Any], client_id: str, audiences: Collection[str], now: float
) -> VerifiedAssertion:
    if claims.get("iss") != client_id or claims.get("sub") != client_id:
        raise invalid_client("client_assertion's iss and sub must both be the client_id.")
    aud = claims.get("aud")
    named = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    if not any(isinstance(a, str) and a in audiences for a in named):
        raise invalid_client(
            f"client_assertion's aud must name this server ({', '.join(sorted(audiences))})."
        )
    exp = claims.get("exp")
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        raise invalid_client("client_assertion must carry exp.")
    if exp + LEEWAY_S <= now:
        raise invalid_client("client_assertion has expired.")
    if exp > now + MAX_LIFETIME_S + LEEWAY_S:
        raise invalid_client(
            f"client_assertion expires too far ahead (at most {MAX_LIFETIME_S} s from now)."
        )
    for name in ("nbf", "iat"):
        value = claims.get(name)
        if value is None:
            continue
        if not isinstance(value, int | float) or isinstance(value, bool) or value > now + LEEWAY_S:
            raise invalid_client(f"client_assertion's {name} is in the future.")
    jti = claims.get("jti")
    if not isinstance(jti, str) or not jti or len(jti) > MAX_JTI_CHARS:
        raise invalid_client("client_assertion must carry a jti (a unique id).")
    return VerifiedAssertion(jti, float(exp + LEEWAY_S))
