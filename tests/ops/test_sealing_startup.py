"""Start-up with sealing at rest: the key store beside the data, a wrong or malformed key refused."""

from __future__ import annotations

import secrets
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from bootstrap.sealing import UNSEALED_NOTICE, build_keyring, open_keyring
from config.settings import Settings
from storage.sealing.errors import MasterKeyError
from storage.sealing.master_key import new_key_text


def _fresh_database(dsn: str) -> str:
    """A new empty database on the test server (the data database of one deployment)."""
    name = f"seal_{secrets.token_hex(4)}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    params = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    return make_conninfo("", **{**params, "dbname": name})


async def _start(settings: Settings, data: str) -> list[str]:
    sealing = build_keyring(settings, data)
    await open_keyring(sealing, data)
    if sealing.keyring is not None:
        await sealing.keyring.close()
    return sealing.notices


async def test_a_wrong_master_key_is_refused_naming_the_setting(dsn: str, tmp_path: Path) -> None:
    data = _fresh_database(dsn)
    key = new_key_text()
    assert await _start(Settings(database_url=data, master_key=key), data) == []
    with pytest.raises(MasterKeyError, match="OWNSONA_MASTER_KEY is not the master key"):
        await _start(Settings(database_url=data, master_key=new_key_text()), data)
    assert await _start(Settings(database_url=data, master_key=key), data) == []


def test_a_malformed_master_key_is_refused_before_anything_connects(tmp_path: Path) -> None:
    with pytest.raises(MasterKeyError, match="^OWNSONA_MASTER_KEY: must decode to 32 bytes"):
        build_keyring(Settings(database_url="postgresql:///x", master_key="c2hvcnQ="), "x")
    missing = tmp_path / "nope.key"
    with pytest.raises(MasterKeyError, match="OWNSONA_MASTER_KEY_FILE: cannot read"):
        build_keyring(Settings(database_url="postgresql:///x", master_key_file=missing), "x")


async def test_a_database_url_without_a_key_runs_unsealed_and_says_how_to_seal(
    dsn: str,
) -> None:
    data = _fresh_database(dsn)
    assert await _start(Settings(database_url=data), data) == [UNSEALED_NOTICE]
    assert "OWNSONA_MASTER_KEY" in UNSEALED_NOTICE and "ownsona seal" in UNSEALED_NOTICE
    assert await _start(Settings(database_url=data), data) == [UNSEALED_NOTICE]  # still plain


async def test_a_missing_key_is_refused_once_the_store_was_sealed(dsn: str) -> None:
    data = _fresh_database(dsn)
    key = new_key_text()
    assert await _start(Settings(database_url=data, master_key=key), data) == []
    with pytest.raises(MasterKeyError, match="^no master key is set .* under master key"):
        await _start(Settings(database_url=data), data)
    with pytest.raises(MasterKeyError, match="OWNSONA_MASTER_KEY"):
        await _start(Settings(database_url=data, seal_memories=False), data)
    assert await _start(Settings(database_url=data, master_key=key), data) == []


async def test_the_embedded_default_generates_its_key_once_and_says_so(
    dsn: str, tmp_path: Path
) -> None:
    data = _fresh_database(dsn)
    settings = Settings(data_dir=tmp_path / "data", seal_memories=True)
    first = await _start(settings, data)
    assert len(first) == 1 and "LOSING IT LOSES EVERY MEMORY" in first[0]
    assert str(tmp_path / "data" / "master.key") in first[0]
    assert await _start(settings, data) == []  # said once
    (tmp_path / "data" / "master.key").write_text(new_key_text())
    with pytest.raises(MasterKeyError):
        await _start(settings, data)


async def test_a_key_generated_while_sealing_is_off_says_nothing_is_sealed_yet(
    dsn: str, tmp_path: Path
) -> None:
    data = _fresh_database(dsn)
    notices = await _start(Settings(data_dir=tmp_path / "data", seal_memories=False), data)
    assert len(notices) == 1
    assert "not sealed yet: OWNSONA_SEAL_MEMORIES is off" in notices[0]
    assert "LOSES EVERY MEMORY" not in notices[0]


async def test_a_lost_key_file_is_refused_naming_the_file_to_put_back(
    dsn: str, tmp_path: Path
) -> None:
    data = _fresh_database(dsn)
    settings = Settings(data_dir=tmp_path / "data", seal_memories=True)
    key_file = tmp_path / "data" / "master.key"
    await _start(settings, data)
    original = key_file.read_text()
    key_file.unlink()  # lost, or left behind when the data folder moved
    with pytest.raises(MasterKeyError, match=r"^the master key file .*master\.key does not") as ex:
        await _start(settings, data)
    assert "It was missing" in str(ex.value) and "Put the original master.key back" in str(ex.value)
    # The key that start wrote stays (never deleted: the operator may be restoring the
    # original at that very moment), opens nothing, and the answer names the file again.
    assert key_file.exists() and key_file.read_text() != original
    with pytest.raises(MasterKeyError, match="Put the original master.key back"):
        await _start(settings, data)
    key_file.write_text(original)
    assert await _start(settings, data) == []
