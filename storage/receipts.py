"""SQL of the write receipts: a retried write (same idempotency key) finds its first result.

Every function takes a connection: the caller owns the transaction.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb


async def get_receipt(conn: AsyncConnection, user_id: int, key: str) -> dict[str, Any] | None:
    cur = await conn.execute(
        "SELECT result FROM write_receipts WHERE user_id = %s AND idempotency_key = %s",
        (user_id, key),
    )
    row = await cur.fetchone()
    return row[0] if row else None


async def lock_receipt_key(conn: AsyncConnection, user_id: int, key: str) -> None:
    """Serialise two concurrent runs of the same write until this transaction ends."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, %s))", (key, user_id))


async def put_receipt(
    conn: AsyncConnection, user_id: int, key: str, tool: str, result: dict[str, Any]
) -> None:
    await conn.execute(
        "INSERT INTO write_receipts (user_id, idempotency_key, tool, result)"
        " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
        (user_id, key, tool, Jsonb(result)),
    )


async def prune_receipts(conn: AsyncConnection, *, older_than_s: int) -> None:
    await conn.execute(
        "DELETE FROM write_receipts WHERE created_at < now() - make_interval(secs => %s)",
        (older_than_s,),
    )
