"""PKCE checks (RFC 7636; OAuth 2.1 §4.1.1 and §7.5.2). Pure functions.

Only ``S256`` is accepted: ``plain`` exposes the verifier in the
authorization request, and OAuth 2.1 lets a server refuse it. The
challenge and the verifier are both 43..128 characters of the unreserved
set ``[A-Za-z0-9-._~]`` (RFC 7636 §4.1, §4.2).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re

#: The one code_challenge_method we accept.
S256 = "S256"

_VALUE = re.compile(r"[A-Za-z0-9\-._~]{43,128}")
# An S256 challenge is BASE64URL(SHA-256(verifier)) without padding: 43 characters.
_S256_CHALLENGE = re.compile(r"[A-Za-z0-9\-_]{43}")


def challenge_problem(challenge: str | None, method: str | None) -> str | None:
    """Why an authorization request's PKCE parameters are refused, or None when they are fine."""
    if not challenge:
        return "code_challenge is required (PKCE with S256, RFC 7636)."
    if method is None or method == "":
        # RFC 7636 §4.3 would default to "plain", which we refuse.
        return "code_challenge_method is required and must be S256."
    if method != S256:
        return f"code_challenge_method {method!r} is not supported; use S256."
    if not _S256_CHALLENGE.fullmatch(challenge):
        return "code_challenge must be the base64url SHA-256 of the verifier (43 characters)."
    return None


def s256(verifier: str) -> str:
    """BASE64URL-ENCODE(SHA256(ASCII(verifier))) without padding (RFC 7636 §4.2)."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def verifier_matches(verifier: str | None, challenge: str) -> bool:
    """Whether ``verifier`` is well formed and hashes to ``challenge``; constant time."""
    if not verifier or not _VALUE.fullmatch(verifier):
        return False
    return hmac.compare_digest(s256(verifier), challenge)
