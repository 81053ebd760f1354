"""SQL of the relation-extraction outbox (``relation_outbox``, migration 0005).

Rows are written by triggers on ``memories`` in the write's own transaction;
these functions relay them: claim the ones due for sending, note a relay that
could not reach the broker, and delete a row once its extraction is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg import AsyncConnection
from psycopg.rows import class_row


@dataclass(frozen=True)
class Owed:
    """One memory whose relation extraction is still owed."""

    memory_id: int
    user_id: int


async def claim_due(
    conn: AsyncConnection,
    *,
    relayed_grace_s: float,
    backoff_s: float,
    max_backoff_s: float,
    limit: int,
    after: int = 0,
    everything: bool = False,
) -> list[Owed]:
    """Lock up to ``limit`` entries due for sending (``memory_id > after``) and push their next send back.

    Due: relayed by their write (``due_at`` NULL) more than ``relayed_grace_s``
    ago, or ``due_at`` reached; with ``everything``, every entry. Each claimed
    entry becomes due again after ``backoff_s`` doubled per earlier send (at
    most ``max_backoff_s``), unless its extraction finishes first. Rows another
    sweeper holds are skipped (SKIP LOCKED), so concurrent sweeps split the
    work instead of sending it twice. Call in a transaction and send before it
    commits: a failed send rolls the claim back.
    """
    cur = conn.cursor(row_factory=class_row(Owed))
    await cur.execute(
        """
        UPDATE relation_outbox o
        SET due_at = now() + make_interval(secs => least(
                %(backoff)s * power(2, least(o.attempts, 20)), %(max_backoff)s)),
            attempts = o.attempts + 1
        FROM (
            SELECT memory_id FROM relation_outbox
            WHERE memory_id > %(after)s
              AND (%(everything)s
                   OR (due_at IS NULL AND queued_at <= now() - make_interval(secs => %(grace)s))
                   OR due_at <= now())
            ORDER BY memory_id
            LIMIT %(limit)s
            FOR UPDATE SKIP LOCKED
        ) due
        WHERE o.memory_id = due.memory_id
        RETURNING o.memory_id, o.user_id
        """,
        {
            "everything": everything,
            "grace": relayed_grace_s,
            "backoff": backoff_s,
            "max_backoff": max_backoff_s,
            "limit": limit,
            "after": after,
        },
    )
    # RETURNING of an UPDATE ... FROM keeps no order: the caller pages by the highest id.
    return sorted(await cur.fetchall(), key=lambda e: e.memory_id)


async def relay_failed(conn: AsyncConnection, memory_ids: Sequence[int]) -> None:
    """The write's relay could not send these: the next sweep sends them."""
    await conn.execute(
        "UPDATE relation_outbox SET due_at = now() WHERE memory_id = ANY(%s) AND due_at IS NULL",
        (list(memory_ids),),
    )


async def finish(conn: AsyncConnection, memory_id: int) -> None:
    """The memory's extraction is stored (or nothing is owed): drop its entry."""
    await conn.execute("DELETE FROM relation_outbox WHERE memory_id = %s", (memory_id,))


async def owe_all(conn: AsyncConnection, user_id: int | None, *, hold_s: float) -> int:
    """Owe an extraction for every active memory (of ``user_id``, or everyone's); return how many.

    The entries fall due only after ``hold_s``: the caller extracts them itself
    meanwhile, and the sweep finishes whatever it leaves undone.
    """
    cur = await conn.execute(
        """
        INSERT INTO relation_outbox (memory_id, user_id, due_at)
        SELECT id, user_id, now() + make_interval(secs => %(hold)s) FROM memories
        WHERE deleted_at IS NULL AND (%(user_id)s::bigint IS NULL OR user_id = %(user_id)s)
        ON CONFLICT (memory_id) DO UPDATE SET due_at = EXCLUDED.due_at
        """,
        {"user_id": user_id, "hold": hold_s},
    )
    return cur.rowcount


async def owed_page(
    conn: AsyncConnection, user_id: int | None, *, after: int, limit: int
) -> list[Owed]:
    """Owed entries (of ``user_id``, or everyone's) with ``memory_id > after``, in id order."""
    cur = conn.cursor(row_factory=class_row(Owed))
    await cur.execute(
        "SELECT memory_id, user_id FROM relation_outbox"
        " WHERE memory_id > %(after)s AND (%(user_id)s::bigint IS NULL OR user_id = %(user_id)s)"
        " ORDER BY memory_id LIMIT %(limit)s",
        {"user_id": user_id, "after": after, "limit": limit},
    )
    return await cur.fetchall()


async def owed_count(conn: AsyncConnection, user_id: int | None = None) -> int:
    cur = await conn.execute(
        "SELECT count(*) FROM relation_outbox WHERE %(user_id)s::bigint IS NULL OR user_id = %(user_id)s",
        {"user_id": user_id},
    )
    row = await cur.fetchone()
    return int(row[0]) if row else 0
