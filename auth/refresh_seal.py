"""A refresh token's successor, sealed under the token it replaced (the grace window).

Within ``OAUTH_REFRESH_GRACE_SECONDS`` of a rotation, the rotated-out token
is answered with the family's live refresh token again (see
:mod:`auth.grants`). The database keeps refresh tokens only as digests, so
the successor is stored sealed: AES-256-GCM under a key derived with
HMAC-SHA256 from the predecessor's own value, bound to the predecessor's
digest as associated data. Only a holder of the predecessor can open it;
the database (digests and ciphertexts) still holds nothing that can be
presented as a credential.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_LABEL = b"ownsona/refresh-token-successor/v1"
_NONCE_BYTES = 12


def _key(holder: str) -> bytes:
    return hmac.new(holder.encode("utf-8", "surrogatepass"), _LABEL, hashlib.sha256).digest()


def seal(holder: str, holder_hash: str, successor: str) -> bytes:
    """``successor`` sealed for whoever presents ``holder`` (whose digest is ``holder_hash``)."""
    nonce = os.urandom(_NONCE_BYTES)
    box = AESGCM(_key(holder)).encrypt(nonce, successor.encode("utf-8"), holder_hash.encode())
    return nonce + box


def unseal(holder: str, holder_hash: str, sealed: bytes) -> str | None:
    """The successor sealed by :func:`seal`; None when ``sealed`` does not open with ``holder``."""
    if len(sealed) <= _NONCE_BYTES:
        return None
    nonce, box = sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:]
    try:
        plain = AESGCM(_key(holder)).decrypt(nonce, box, holder_hash.encode())
    except InvalidTag:
        return None
    return plain.decode("utf-8")
