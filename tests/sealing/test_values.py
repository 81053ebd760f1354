"""Sealed values and wrapped keys: what opens where, and what never leaks (pure)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from storage.sealing import envelope
from storage.sealing.errors import MasterKeyError, SealedValueError
from storage.sealing.master_key import (
    MasterKey,
    create_key_file,
    new_key_text,
    parse_master_key,
    read_key_file,
)
from storage.sealing.user_keys import TAGS, TERMS, TEXT, UserKeys


def _master() -> MasterKey:
    return parse_master_key(new_key_text(), source="test")


def test_a_value_opens_only_for_its_user_row_and_column() -> None:
    alice_key = envelope.new_data_key()
    alice = UserKeys(1, alice_key)
    bob = UserKeys(2, envelope.new_data_key())
    sealed = alice.seal("my blood type is AB-", row_id=10, column="text")
    assert b"AB-" not in sealed
    assert alice.open(sealed, 10, "text") == "my blood type is AB-"
    for opener, row, column in ((alice, 11, "text"), (alice, 10, "tags"), (bob, 10, "text")):
        with pytest.raises(SealedValueError, match="does not open"):
            opener.open(sealed, row, column)
    # The same data key under another user id: the associated data still refuses it.
    twin = UserKeys(2, alice_key)
    with pytest.raises(SealedValueError):
        twin.open(sealed, 10, "text")


def test_an_altered_value_is_refused() -> None:
    keys = UserKeys(1, envelope.new_data_key())
    sealed = bytearray(keys.seal("x", 1, "text"))
    sealed[-1] ^= 1
    with pytest.raises(SealedValueError):
        keys.open(bytes(sealed), 1, "text")
    with pytest.raises(SealedValueError, match="not a sealed value"):
        keys.open(b"plain", 1, "text")


def test_sealing_twice_gives_two_ciphertexts() -> None:
    keys = UserKeys(1, envelope.new_data_key())
    assert keys.seal("same", 1, "text") != keys.seal("same", 1, "text")


def test_keyed_hashes_are_per_user_and_per_purpose() -> None:
    data_key = envelope.new_data_key()
    alice, alice_again = UserKeys(1, data_key), UserKeys(1, data_key)
    bob = UserKeys(2, envelope.new_data_key())
    assert alice.keyed(TERMS, "blood") == alice_again.keyed(TERMS, "blood")
    assert alice.keyed(TERMS, "blood") != bob.keyed(TERMS, "blood")
    assert len({alice.keyed(p, "blood") for p in (TERMS, TAGS, TEXT)}) == 3
    assert "blood" not in alice.keyed(TERMS, "blood")


def test_a_data_key_unwraps_only_for_its_user_under_its_master_key() -> None:
    master, other = _master(), _master()
    data_key = envelope.new_data_key()
    wrapped = envelope.wrap(master, 7, data_key)
    assert data_key not in wrapped
    assert envelope.unwrap(master, 7, wrapped) == data_key
    with pytest.raises(MasterKeyError):
        envelope.unwrap(master, 8, wrapped)
    with pytest.raises(MasterKeyError):
        envelope.unwrap(other, 7, wrapped)


def test_the_check_value_opens_under_its_key_only() -> None:
    master, other = _master(), _master()
    check = master.check_value()
    assert master.verify(check)
    assert not other.verify(check)


def test_master_key_text_forms() -> None:
    text = new_key_text()
    key = parse_master_key(text, source="OWNSONA_MASTER_KEY")
    import base64

    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    assert parse_master_key(base64.b64encode(raw).decode(), source="x").id == key.id
    with pytest.raises(MasterKeyError, match="OWNSONA_MASTER_KEY: must decode to 32 bytes"):
        parse_master_key(base64.b64encode(b"short").decode(), source="OWNSONA_MASTER_KEY")
    with pytest.raises(MasterKeyError, match="OWNSONA_MASTER_KEY: not base64"):
        parse_master_key("not base64 at all!", source="OWNSONA_MASTER_KEY")
    assert text not in repr(key)


def test_a_generated_key_file_is_private_and_written_once(tmp_path: Path) -> None:
    path = tmp_path / "data" / "master.key"
    assert create_key_file(path)
    first = read_key_file(path, source="test").id
    assert not create_key_file(path)
    assert read_key_file(path, source="test").id == first
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_no_repr_shows_a_key() -> None:
    from config.settings import Settings

    text, previous = new_key_text(), new_key_text()
    settings = Settings(master_key=text, master_key_previous=previous)
    keys = UserKeys(3, envelope.new_data_key())
    shown = repr(settings) + repr(parse_master_key(text, source="x")) + repr(keys)
    assert text not in shown and previous not in shown
    assert "UserKeys(user_id=3)" in shown


def test_fixed_phrases_hash_as_each_phrase_does_and_are_remembered_per_keys() -> None:
    data_key = envelope.new_data_key()
    keys = UserKeys(1, data_key)
    phrases = ("lives in", "favorite ", "user")
    first = keys.keyed_fixed_phrases(phrases)
    assert first == tuple(keys.keyed_phrase(p) for p in phrases)
    assert keys.keyed_fixed_phrases(phrases) is first  # remembered, not hashed again
    # Another process's keys for the same user and data key: the same hashes.
    assert UserKeys(1, data_key).keyed_fixed_phrases(phrases) == first
    assert UserKeys(2, envelope.new_data_key()).keyed_fixed_phrases(phrases) != first
