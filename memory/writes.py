"""One write, one transaction, at most once per idempotency key (DESIGN: quality bars).

The answer to a write is stored as a receipt in the write's own transaction:
a message redelivered after a worker died, or a client retrying the same
request, finds the receipt and gets the first answer back instead of writing
again.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from storage import memories as store

from .deps import Deps

#: Receipts outlive any sane client retry or broker redelivery.
RECEIPT_TTL_S = 86_400
#: Share of writes that also delete expired receipts (amortised clean-up).
_PRUNE_CHANCE = 1 / 64

Work = Callable[[psycopg.AsyncConnection], Awaitable[dict[str, Any]]]


async def prior_receipt(
    deps: Deps, user_id: int, idempotency_key: str | None
) -> dict[str, Any] | None:
    """The stored answer of this write if it already happened (checked before costly work)."""
    if not idempotency_key:
        return None
    async with deps.pool.connection() as conn:
        return await store.get_receipt(conn, user_id, idempotency_key)


async def run_write(
    deps: Deps, user_id: int, tool: str, idempotency_key: str | None, work: Work
) -> dict[str, Any]:
    """Run ``work(conn)`` in one transaction and store its answer under the key.

    Two runs of the same key are serialised by an advisory lock; the second
    returns the first one's receipt. Without a key (dry runs) nothing is stored.
    """
    async with deps.pool.connection() as conn, conn.transaction():
        if idempotency_key:
            await store.lock_receipt_key(conn, user_id, idempotency_key)
            prior = await store.get_receipt(conn, user_id, idempotency_key)
            if prior is not None:
                return prior
        payload = await work(conn)
        if idempotency_key:
            await store.put_receipt(conn, user_id, idempotency_key, tool, payload)
            if random.random() < _PRUNE_CHANCE:
                await store.prune_receipts(conn, older_than_s=RECEIPT_TTL_S)
        return payload
