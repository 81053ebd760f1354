"""``ownsona seal``, what sits around the memories: plain receipts, uploads and audit queries sealed.

The values migration 0025 seals (``storage.sealed_values``) written before a
deployment sealed: a write's stored answer, a chat export waiting for its import,
a recorded query. One user's batch per transaction, each row locked and rewritten
only while it is still plain, so a run beside writers (who write sealed already)
or a second run changes nothing twice; no resume point is needed.
"""

from __future__ import annotations

import json

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from storage.sealing.user_keys import UserKeys


async def plain_users(conn: AsyncConnection) -> list[int]:
    """Users with a plain receipt, upload or recorded query."""
    cur = await conn.execute(
        "SELECT user_id FROM write_receipts WHERE result_sealed IS NULL"
        " UNION SELECT user_id FROM console_uploads WHERE export_sealed IS NULL"
        " UNION SELECT user_id FROM audit_events"
        "  WHERE query IS NOT NULL AND query_sealed IS NULL"
        " ORDER BY 1"
    )
    return [int(r[0]) for r in await cur.fetchall()]


async def seal_batch(conn: AsyncConnection, keys: UserKeys, *, limit: int) -> int:
    """Seal up to ``limit`` plain rows of each table for the user (in a transaction); how many."""
    return (
        await _receipts(conn, keys, limit)
        + await _uploads(conn, keys, limit)
        + await _audit_queries(conn, keys, limit)
    )


async def _receipts(conn: AsyncConnection, keys: UserKeys, limit: int) -> int:
    cur = await conn.execute(
        "SELECT idempotency_key, result FROM write_receipts"
        " WHERE user_id = %s AND result_sealed IS NULL ORDER BY idempotency_key LIMIT %s"
        " FOR UPDATE",
        (keys.user_id, limit),
    )
    rows = await cur.fetchall()
    async with conn.cursor() as update:
        await update.executemany(
            "UPDATE write_receipts SET result = '{}', result_sealed = %s"
            " WHERE user_id = %s AND idempotency_key = %s AND result_sealed IS NULL",
            [
                (keys.seal_named(json.dumps(result), key, "result"), keys.user_id, key)
                for key, result in rows
            ],
        )
    return len(rows)


async def _uploads(conn: AsyncConnection, keys: UserKeys, limit: int) -> int:
    cur = await conn.execute(
        "SELECT id, filename, export FROM console_uploads"
        " WHERE user_id = %s AND export_sealed IS NULL ORDER BY id LIMIT %s FOR UPDATE",
        (keys.user_id, limit),
    )
    rows = await cur.fetchall()
    async with conn.cursor() as update:
        await update.executemany(
            "UPDATE console_uploads SET filename = '', export = %s, filename_sealed = %s,"
            " export_sealed = %s WHERE user_id = %s AND id = %s AND export_sealed IS NULL",
            [
                (
                    Jsonb({}),
                    keys.seal_named(filename, upload_id, "filename"),
                    keys.seal_named(json.dumps(export), upload_id, "export"),
                    keys.user_id,
                    upload_id,
                )
                for upload_id, filename, export in rows
            ],
        )
    return len(rows)


async def _audit_queries(conn: AsyncConnection, keys: UserKeys, limit: int) -> int:
    cur = await conn.execute(
        "SELECT id, query FROM audit_events WHERE user_id = %s AND query IS NOT NULL"
        " AND query_sealed IS NULL ORDER BY id LIMIT %s FOR UPDATE",
        (keys.user_id, limit),
    )
    rows = await cur.fetchall()
    async with conn.cursor() as update:
        await update.executemany(
            "UPDATE audit_events SET query = NULL, query_sealed = %s"
            " WHERE user_id = %s AND id = %s AND query_sealed IS NULL",
            [
                (keys.seal(query, int(row_id), "query"), keys.user_id, row_id)
                for row_id, query in rows
            ],
        )
    return len(rows)
