"""Per-user data keys, wrapped by the master key (AES-GCM; associated data: user and key id).

A wrapped key is ``version (1 byte) || nonce (12) || AES-GCM(dek) + tag``. The
associated data binds it to its user and to the master key's id, so a wrapped key
copied onto another user's entry does not unwrap.
"""

from __future__ import annotations

import secrets
import struct

from cryptography.exceptions import InvalidTag

from .errors import MasterKeyError
from .master_key import MasterKey

DATA_KEY_BYTES = 32
_VERSION = 1
_NONCE_BYTES = 12


def new_data_key() -> bytes:
    return secrets.token_bytes(DATA_KEY_BYTES)


def _associated(user_id: int, key_id: str) -> bytes:
    return b"ownsona dek v1" + struct.pack(">q", user_id) + key_id.encode("ascii")


def wrap(master: MasterKey, user_id: int, data_key: bytes) -> bytes:
    nonce = secrets.token_bytes(_NONCE_BYTES)
    sealed = master.aead.encrypt(nonce, data_key, _associated(user_id, master.id))
    return bytes([_VERSION]) + nonce + sealed


def unwrap(master: MasterKey, user_id: int, wrapped: bytes) -> bytes:
    """The data key; :class:`MasterKeyError` if it was not wrapped for this user under this key."""
    if not wrapped or wrapped[0] != _VERSION:
        raise MasterKeyError(f"user {user_id}: wrapped data key of an unknown format")
    nonce, sealed = wrapped[1 : 1 + _NONCE_BYTES], wrapped[1 + _NONCE_BYTES :]
    try:
        return master.aead.decrypt(nonce, sealed, _associated(user_id, master.id))
    except InvalidTag as ex:
        raise MasterKeyError(
            f"user {user_id}: the data key does not unwrap under master key {master.id}"
        ) from ex
