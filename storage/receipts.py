"""SQL of the write receipts: a retried write (same idempotency key) finds its first result.

Every function takes a connection: the caller owns the transaction.

A receipt also lists the memory ids its result names (``memory_ids``) and
gets a rising ``seq``: :func:`get_receipt` with ``window_s`` honours a
receipt only while it is that young and no later receipt of the same user
names one of its memories (memory/writes.py says why).

Sealed at rest (migration 0025): when the call seals, ``result`` is ``{}`` and
``result_sealed`` the answer, bound to (user, idempotency key, ``result``); a retried
call gets the same answer from either kind of row (``storage.sealed_values``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from .sealed_values import open_named_json, seal_named_json

#: The column a receipt's answer is sealed as (the associated data's column name).
_RESULT = "result"


async def get_receipt(
    conn: AsyncConnection,
    user_id: int,
    key: str,
    *,
    window_s: int | None = None,
    submission: str | None = None,
) -> dict[str, Any] | None:
    """The stored result under ``key``; with ``window_s``, only a receipt that still stands,
    or that was written for this very ``submission`` (a redelivered message)."""
    if window_s is None:
        cur = await conn.execute(
            "SELECT result, result_sealed FROM write_receipts WHERE user_id = %s AND idempotency_key = %s",
            (user_id, key),
        )
    else:
        cur = await conn.execute(
            "SELECT r.result, r.result_sealed FROM write_receipts r"
            " WHERE r.user_id = %s AND r.idempotency_key = %s"
            " AND (r.submission = %s OR (r.created_at > now() - make_interval(secs => %s)"
            # The later receipt names the user itself (not through r): Citus routes a
            # statement to one node only when every table in it does.
            " AND NOT EXISTS (SELECT 1 FROM write_receipts later"
            "  WHERE later.user_id = %s AND later.seq > r.seq"
            "  AND later.memory_ids && r.memory_ids)))",
            (user_id, key, submission, window_s, user_id),
        )
    row = await cur.fetchone()
    if row is None:
        return None
    opened: dict[str, Any] = open_named_json(user_id, key, _RESULT, row[0], row[1])
    return opened


async def receipt_exists(conn: AsyncConnection, user_id: int, key: str) -> bool:
    """Whether a receipt is stored under ``key`` (its answer, sealed or not, left unopened)."""
    cur = await conn.execute(
        "SELECT 1 FROM write_receipts WHERE user_id = %s AND idempotency_key = %s",
        (user_id, key),
    )
    return await cur.fetchone() is not None


async def lock_receipt_key(conn: AsyncConnection, user_id: int, key: str) -> None:
    """Serialise two concurrent runs of the same write until this transaction ends."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, %s))", (key, user_id))


async def put_receipt(
    conn: AsyncConnection,
    user_id: int,
    key: str,
    tool: str,
    result: dict[str, Any],
    memory_ids: Sequence[int] = (),
    submission: str | None = None,
) -> None:
    """Store (or replace: a window receipt that no longer stood) the result under ``key``."""
    sealed = seal_named_json(user_id, key, _RESULT, result)
    await conn.execute(
        "INSERT INTO write_receipts"
        " (user_id, idempotency_key, tool, result, result_sealed, memory_ids, submission)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (user_id, idempotency_key) DO UPDATE SET tool = EXCLUDED.tool,"
        " result = EXCLUDED.result, result_sealed = EXCLUDED.result_sealed,"
        " memory_ids = EXCLUDED.memory_ids,"
        # The replacement's time and sequence number are the defaults the proposed row
        # drew (now() and a fresh seq): Citus refuses a function in DO UPDATE SET.
        " submission = EXCLUDED.submission, created_at = EXCLUDED.created_at,"
        " seq = EXCLUDED.seq",
        (
            user_id,
            key,
            tool,
            Jsonb({} if sealed is not None else result),
            sealed,
            list(memory_ids),
            submission,
        ),
    )


async def prune_receipts(conn: AsyncConnection, *, older_than_s: int) -> None:
    await conn.execute(
        "DELETE FROM write_receipts WHERE created_at < now() - make_interval(secs => %s)",
        (older_than_s,),
    )
