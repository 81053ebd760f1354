"""The master key (key-encryption key): read from the environment or a file, never the database.

``OWNSONA_MASTER_KEY`` holds 32 bytes in base64 (standard or URL-safe, padding
optional); ``OWNSONA_MASTER_KEY_FILE`` names a file holding the same text. The
embedded default generates one into its data folder on first start
(:func:`create_key_file`).

The key's id (:func:`key_id`) is an HMAC of a constant under the key: it names
the key in the key store without revealing it. The key check value
(:func:`check_value`) is a constant sealed under the key; opening it at start-up
(:func:`verify_check_value`) proves the configured key is the one the store uses.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .errors import MasterKeyError

KEY_BYTES = 32
_NONCE_BYTES = 12
_CHECK_PLAINTEXT = b"ownsona master key check v1"
_ID_CONSTANT = b"ownsona master key id v1"


class MasterKey:
    """A 32-byte key-encryption key. Its repr never shows the key."""

    __slots__ = ("_key", "id")

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise MasterKeyError(f"the master key must be {KEY_BYTES} bytes, got {len(key)}")
        self._key = key
        self.id = key_id(key)

    def __repr__(self) -> str:
        return f"MasterKey(id={self.id})"

    @property
    def aead(self) -> AESGCM:
        return AESGCM(self._key)

    def check_value(self) -> bytes:
        return check_value(self)

    def verify(self, check: bytes) -> bool:
        return verify_check_value(self, check)


def key_id(key: bytes) -> str:
    """A short public name for the key: 16 hex digits of HMAC-SHA256(key, constant)."""
    return hmac.new(key, _ID_CONSTANT, hashlib.sha256).hexdigest()[:16]


def parse_master_key(text: str, *, source: str) -> MasterKey:
    """The key encoded in ``text`` (base64 or URL-safe base64 of 32 bytes).

    ``source`` names where it came from (a setting or a file) for the message.
    """
    cleaned = "".join(text.split())
    cleaned += "=" * (-len(cleaned) % 4)
    try:
        if "-" in cleaned or "_" in cleaned:
            raw = base64.urlsafe_b64decode(cleaned)
        else:
            raw = base64.b64decode(cleaned, validate=True)
    except (binascii.Error, ValueError) as ex:
        raise MasterKeyError(f"{source}: not base64 of {KEY_BYTES} bytes") from ex
    if len(raw) != KEY_BYTES:
        raise MasterKeyError(
            f"{source}: must decode to {KEY_BYTES} bytes, decodes to {len(raw)}"
            " (make one with: ownsona keys new)"
        )
    return MasterKey(raw)


def read_key_file(path: Path, *, source: str) -> MasterKey:
    try:
        text = path.read_text(encoding="ascii")
    except OSError as ex:
        raise MasterKeyError(f"{source}: cannot read {path}: {ex.strerror}") from ex
    except UnicodeDecodeError as ex:
        raise MasterKeyError(f"{source}: {path} does not hold base64 text") from ex
    return parse_master_key(text, source=f"{source} ({path})")


def encode(key: bytes) -> str:
    """The text form of a key (URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(key).decode("ascii").rstrip("=")


def new_key_text() -> str:
    """A fresh random master key in its text form."""
    return encode(secrets.token_bytes(KEY_BYTES))


def create_key_file(path: Path) -> bool:
    """Write a new random key to ``path`` (mode 0600) unless it exists; True if created.

    ``O_EXCL``: two processes starting at once never write two different keys.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(new_key_text() + "\n")
    return True


def check_value(key: MasterKey) -> bytes:
    """A known constant sealed under ``key`` (associated data: the key's id)."""
    nonce = secrets.token_bytes(_NONCE_BYTES)
    return nonce + key.aead.encrypt(nonce, _CHECK_PLAINTEXT, key.id.encode("ascii"))


def verify_check_value(key: MasterKey, check: bytes) -> bool:
    """Whether ``check`` (from :func:`check_value`) opens under ``key``."""
    try:
        opened = key.aead.decrypt(
            check[:_NONCE_BYTES], check[_NONCE_BYTES:], key.id.encode("ascii")
        )
    except InvalidTag:
        return False
    return hmac.compare_digest(opened, _CHECK_PLAINTEXT)
