"""One user's opened data key: seal and open values, keyed hashes for terms, tags and dedupe.

**Sealed values.** ``version (1 byte) || nonce (12, random) || AES-GCM ciphertext + tag``.
The associated data is ``(user id, row id, column)``: a value copied onto another
user's row, another row or another column fails with :class:`SealedValueError` and
returns nothing of its text.

**Keyed hashes.** HMAC-SHA256 under keys derived from the data key with HKDF, one
per purpose (terms, tags, normalized text), so a tag's hash never equals a word's.
Deterministic within a user (equality, counts, unique indexes work), unrelated across
users, and gone with the user's data key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import struct
from collections.abc import Iterable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .errors import SealedValueError

VERSION = 1
_NONCE_BYTES = 12
#: Bytes of HMAC kept per keyed hash: 128 bits, no collision among one user's words.
_HASH_BYTES = 16

TERMS = b"terms"
TAGS = b"tags"
TEXT = b"normalized text"
#: Relation phrases (subject, predicate, object, predicate prefixes), lowercase, for lookups.
PHRASES = b"relation phrases"
#: Sets of fixed phrases whose keyed hashes one :class:`UserKeys` remembers at most.
_FIXED_SETS = 16


def _derive(data_key: bytes, purpose: bytes) -> bytes:
    return HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=b"ownsona keyed hash v1 " + purpose
    ).derive(data_key)


def associated_data(user_id: int, row_id: int, column: str) -> bytes:
    return b"ownsona v1" + struct.pack(">qq", user_id, row_id) + column.encode("ascii")


def associated_data_named(user_id: int, row_key: str, column: str) -> bytes:
    """:func:`associated_data` for a row named by text (an upload's id, a receipt's key).

    Its own prefix, and the key's length before it, so no (key, column) pair reads as
    another, nor as a numbered row's.
    """
    key = row_key.encode("utf-8")
    return (
        b"ownsona v1 named" + struct.pack(">qI", user_id, len(key)) + key + column.encode("ascii")
    )


class UserKeys:
    """The opened keys of one user. Its repr never shows them."""

    __slots__ = ("_aead", "_fixed", "_hash_keys", "user_id")

    def __init__(self, user_id: int, data_key: bytes) -> None:
        self.user_id = user_id
        self._aead = AESGCM(data_key)
        self._hash_keys = {p: _derive(data_key, p) for p in (TERMS, TAGS, TEXT, PHRASES)}
        self._fixed: dict[tuple[str, ...], tuple[str, ...]] = {}

    def __repr__(self) -> str:
        return f"UserKeys(user_id={self.user_id})"

    def seal(self, value: str, row_id: int, column: str) -> bytes:
        return self._seal(value, associated_data(self.user_id, row_id, column))

    def open(self, sealed: bytes, row_id: int, column: str) -> str:
        """The text sealed for this user, row and column; else :class:`SealedValueError`."""
        return self._open(
            sealed, associated_data(self.user_id, row_id, column), f"{column} of row {row_id}"
        )

    def seal_named(self, value: str, row_key: str, column: str) -> bytes:
        """:meth:`seal` for a row whose id is text (:func:`associated_data_named`)."""
        return self._seal(value, associated_data_named(self.user_id, row_key, column))

    def open_named(self, sealed: bytes, row_key: str, column: str) -> str:
        """:meth:`open` for a row whose id is text; the error never names the key (user text)."""
        return self._open(
            sealed, associated_data_named(self.user_id, row_key, column), f"{column} of a row"
        )

    def _seal(self, value: str, ad: bytes) -> bytes:
        nonce = secrets.token_bytes(_NONCE_BYTES)
        return bytes([VERSION]) + nonce + self._aead.encrypt(nonce, value.encode("utf-8"), ad)

    def _open(self, sealed: bytes, ad: bytes, what: str) -> str:
        """``sealed`` opened under ``ad``; ``what`` names the value in the error (no user text)."""
        if len(sealed) < 1 + _NONCE_BYTES + 16 or sealed[0] != VERSION:
            raise SealedValueError(f"{what}: not a sealed value")
        nonce, body = sealed[1 : 1 + _NONCE_BYTES], sealed[1 + _NONCE_BYTES :]
        try:
            plain = self._aead.decrypt(nonce, body, ad)
        except InvalidTag as ex:
            raise SealedValueError(
                f"{what} does not open for user {self.user_id}"
                " (sealed for another row, column or user, or altered)"
            ) from ex
        return plain.decode("utf-8")

    def keyed(self, purpose: bytes, value: str) -> str:
        """The keyed hash of ``value`` for ``purpose`` (:data:`TERMS`, :data:`TAGS`, :data:`TEXT`)."""
        digest = hmac.new(self._hash_keys[purpose], value.encode("utf-8"), hashlib.sha256)
        return base64.urlsafe_b64encode(digest.digest()[:_HASH_BYTES]).decode("ascii").rstrip("=")

    def keyed_phrase(self, phrase: str) -> str:
        """The keyed hash of a relation phrase, in lowercase hex: what SQL compares with
        ``lower(column)`` stays a hash (``storage.sealed_relations``)."""
        digest = hmac.new(self._hash_keys[PHRASES], phrase.encode("utf-8"), hashlib.sha256)
        return digest.hexdigest()[: 2 * _HASH_BYTES]

    def keyed_fixed_phrases(self, phrases: tuple[str, ...]) -> tuple[str, ...]:
        """:meth:`keyed_phrase` of each of ``phrases``, a set the code names (the functional
        predicates, the user's entity), never what a user wrote: remembered with these keys
        (and gone with them), since every recall asks for the same forty or so."""
        found = self._fixed.get(phrases)
        if found is None:
            if len(self._fixed) >= _FIXED_SETS:
                self._fixed.clear()
            found = self._fixed[phrases] = tuple(self.keyed_phrase(p) for p in phrases)
        return found

    def keyed_terms(self, terms: Iterable[str]) -> list[str]:
        return [self.keyed(TERMS, t) for t in terms]

    def keyed_tags(self, tags: Iterable[str]) -> list[str]:
        return [self.keyed(TAGS, t) for t in tags]
