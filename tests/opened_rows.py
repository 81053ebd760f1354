"""What a user sees of stored memories, read straight from SQL by tests that watch processes.

A test that checks what a server or worker stored reads the rows itself; a
sealed row holds ``text`` '' and the text in ``text_sealed``. :func:`memory_texts`
opens it as the deployment would: the user's data key from the key store beside
the data database, unwrapped with the master key the processes were given (the
session's, ``OWNSONA_MASTER_KEY``). Plain rows read as they are.
"""

from __future__ import annotations

import os
from typing import Any

import psycopg
from psycopg import sql

from storage import key_store
from storage.sealing import envelope
from storage.sealing.master_key import parse_master_key
from storage.sealing.user_keys import UserKeys


def memory_texts(
    dsn: str, where: str = "TRUE", params: tuple[Any, ...] = (), *, master_key: str | None = None
) -> list[tuple[int, str]]:
    """``(id, text)`` of the memories matching ``where`` (over ``memories m`` joined with
    ``users u``), in id order, sealed texts opened."""
    return [(row_id, text) for row_id, _, text in _opened(dsn, where, params, master_key)]


def user_texts(
    dsn: str, where: str = "TRUE", params: tuple[Any, ...] = ()
) -> list[tuple[str, str]]:
    """``(username, text)`` of the memories matching ``where``, in id order, opened."""
    return [(username, text) for _, username, text in _opened(dsn, where, params, None)]


def _opened(
    dsn: str, where: str, params: tuple[Any, ...], master_key: str | None
) -> list[tuple[int, str, str]]:
    query = sql.SQL(
        "SELECT m.id, m.user_id, u.username, m.text, m.text_sealed FROM memories m"
        " JOIN users u ON u.id = m.user_id WHERE {} ORDER BY m.id"
    ).format(sql.SQL(where))  # type: ignore[arg-type]  # a test's own constant condition
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(query, params).fetchall()
    keys: dict[int, UserKeys] = {}
    out = []
    for row_id, user_id, username, text, sealed in rows:
        if sealed is not None:
            if user_id not in keys:
                keys[user_id] = _user_keys(dsn, user_id, master_key)
            text = keys[user_id].open(bytes(sealed), row_id, "text")
        out.append((int(row_id), str(username), str(text)))
    return out


def _user_keys(dsn: str, user_id: int, master_key: str | None) -> UserKeys:
    master = parse_master_key(
        master_key or os.environ["OWNSONA_MASTER_KEY"], source="the tests' master key"
    )
    with psycopg.connect(key_store.beside(dsn)) as conn:
        row = conn.execute(
            "SELECT wrapped FROM data_keys WHERE user_id = %s", (user_id,)
        ).fetchone()
    assert row is not None, f"user {user_id} has sealed rows and no data key"
    return UserKeys(user_id, envelope.unwrap(master, user_id, bytes(row[0])))
