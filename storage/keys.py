"""JWT signing-key SQL: the ``signing_keys`` table (SUPPLEMENT §8).

A key is *active* while ``retired_at`` is NULL; the newest active key signs.
A retired key still verifies for a grace period chosen by the caller (at
least the longest access-token lifetime), so a rotation logs nobody out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from .rows import select_list

#: ``pg_advisory_xact_lock(class, object)`` key that serialises creating and
#: rotating signing keys across processes.
SIGNING_KEY_LOCK = (0x4F53_4F4E, 2)


@dataclass(frozen=True)
class SigningKeyRow:
    kid: str
    algorithm: str
    #: The private key as a JWK (RFC 7517) object.
    private_jwk: dict[str, Any]
    created_at: datetime
    retired_at: datetime | None


_COLUMNS = sql.SQL(select_list(SigningKeyRow))


async def insert_key(
    conn: AsyncConnection, kid: str, algorithm: str, private_jwk: dict[str, Any]
) -> SigningKeyRow:
    async with conn.cursor(row_factory=class_row(SigningKeyRow)) as cur:
        await cur.execute(
            sql.SQL(
                """
            INSERT INTO signing_keys (kid, algorithm, private_jwk) VALUES (%s, %s, %s)
            RETURNING {}
            """
            ).format(_COLUMNS),
            (kid, algorithm, Jsonb(private_jwk)),
        )
        row = await cur.fetchone()
        assert row is not None
        return row


async def list_usable_keys(conn: AsyncConnection, retired_within_s: float) -> list[SigningKeyRow]:
    """Active keys and keys retired less than ``retired_within_s`` seconds ago, newest first."""
    async with conn.cursor(row_factory=class_row(SigningKeyRow)) as cur:
        await cur.execute(
            sql.SQL(
                """
            SELECT {} FROM signing_keys
            WHERE retired_at IS NULL OR retired_at > now() - make_interval(secs => %s)
            ORDER BY created_at DESC, kid DESC
            """
            ).format(_COLUMNS),
            (float(retired_within_s),),
        )
        return await cur.fetchall()


async def retire_key(conn: AsyncConnection, kid: str) -> bool:
    """Start the key's grace period now; False if it is unknown or already retired."""
    cur = await conn.execute(
        "UPDATE signing_keys SET retired_at = now() WHERE kid = %s AND retired_at IS NULL", (kid,)
    )
    return cur.rowcount == 1


async def retire_other_keys(conn: AsyncConnection, keep_kid: str) -> int:
    """Retire every active key except ``keep_kid``; how many were retired."""
    cur = await conn.execute(
        "UPDATE signing_keys SET retired_at = now() WHERE retired_at IS NULL AND kid <> %s",
        (keep_kid,),
    )
    return cur.rowcount


async def lock_signing_keys(conn: AsyncConnection) -> None:
    """Block until this transaction holds the signing-key lock (released at its end)."""
    await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", SIGNING_KEY_LOCK)
