"""SQL of the relation-extraction outbox (``relation_outbox``, migration 0005).

Rows are written in the write's own transaction, by the statements that store a
memory's text (:func:`owe_new`, :func:`owe_again`, :func:`settle_restored`; until
migration 0021 triggers on ``memories`` did it, and still do for the release
before it, see ``storage.terms``); the rest relay them: claim the ones due for
sending, note a relay that could not reach the broker, and delete a row once its
extraction is stored.
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


async def owe_new(conn: AsyncConnection, user_id: int, memory_ids: Sequence[int]) -> None:
    """Owe an extraction for each of these just-inserted memories that is not forgotten.

    What the insert trigger of 0005 did: an entry already there is left alone.
    Read from ``memories`` (the same user's shard on Citus, where an INSERT ...
    SELECT between colocated tables stays on one node).
    """
    if memory_ids:
        await conn.execute(
            "INSERT INTO relation_outbox (memory_id, user_id)"
            " SELECT id, user_id FROM memories"
            " WHERE user_id = %s AND id = ANY(%s) AND deleted_at IS NULL"
            " ON CONFLICT DO NOTHING",
            (user_id, list(memory_ids)),
        )


async def owe_again(conn: AsyncConnection, user_id: int, memory_id: int) -> None:
    """The memory's text changed (and it is not forgotten): its extraction starts over."""
    await conn.execute(
        "INSERT INTO relation_outbox (memory_id, user_id) VALUES (%s, %s)"
        " ON CONFLICT (memory_id) DO UPDATE SET queued_at = now(),"
        " queued_xact = pg_current_xact_id(), due_at = NULL, attempts = 0",
        (memory_id, user_id),
    )


async def settle_restored(conn: AsyncConnection, user_id: int, memory_ids: Sequence[int]) -> None:
    """These memories were stored in this transaction together with their edges: nothing is owed.

    An import restores a memory and its edges in one transaction; those edges are
    that text's edges. Only for memories this transaction inserted: the
    extraction job's own edges go through :func:`finish`.
    """
    if memory_ids:
        await conn.execute(
            "DELETE FROM relation_outbox WHERE user_id = %s AND memory_id = ANY(%s)",
            (user_id, sorted(set(memory_ids))),
        )


async def claim_due(
    conn: AsyncConnection,
    *,
    relayed_grace_s: float,
    backoff_s: float,
    max_backoff_s: float,
    limit: int,
    lease_s: float,
    after: int = 0,
    everything: bool = False,
) -> list[Owed]:
    """Claim up to ``limit`` entries due for sending (``memory_id > after``) and push their next send back.

    Due: relayed by their write (``due_at`` NULL) more than ``relayed_grace_s``
    ago, or ``due_at`` reached; with ``everything``, every entry. Each claimed
    entry becomes due again after ``backoff_s`` doubled per earlier send (at
    most ``max_backoff_s``, never less than ``lease_s``), unless its extraction
    finishes first. Commit at once and send afterwards, outside any
    transaction: the pushed-back ``due_at`` is the claim (a concurrent sweep
    finds the entries not due), and no row lock is held while the broker is
    slow, so edits and finished extractions never wait for it. Rows another
    sweeper is claiming are skipped (SKIP LOCKED). A send that fails is undone
    with :func:`unclaim`.
    """
    cur = conn.cursor(row_factory=class_row(Owed))
    await cur.execute(
        """
        UPDATE relation_outbox o
        SET due_at = now() + make_interval(secs => greatest(least(
                %(backoff)s * power(2, least(o.attempts, 20)), %(max_backoff)s), %(lease)s)),
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
            "lease": lease_s,
            "limit": limit,
            "after": after,
        },
    )
    # RETURNING of an UPDATE ... FROM keeps no order: the caller pages by the highest id.
    return sorted(await cur.fetchall(), key=lambda e: e.memory_id)


async def unclaim(conn: AsyncConnection, memory_ids: Sequence[int]) -> None:
    """The sweep could not send these claimed entries: due again now, the send not counted.

    An entry whose text changed since the claim (``attempts`` back to 0, its
    write relays it) is left alone.
    """
    await conn.execute(
        "UPDATE relation_outbox SET due_at = now(), attempts = attempts - 1"
        " WHERE memory_id = ANY(%s) AND attempts > 0",
        (list(memory_ids),),
    )


async def is_owed(conn: AsyncConnection, user_id: int, memory_id: int) -> bool:
    # user_id too: every statement on a user's table names its user (shard-ready, docs/scaling.md).
    cur = await conn.execute(
        "SELECT 1 FROM relation_outbox WHERE user_id = %s AND memory_id = %s", (user_id, memory_id)
    )
    return await cur.fetchone() is not None


async def owed_among(conn: AsyncConnection, memory_ids: Sequence[int]) -> list[int]:
    """Those of ``memory_ids`` (in their order) that are owed an extraction."""
    cur = await conn.execute(
        "SELECT memory_id FROM relation_outbox WHERE memory_id = ANY(%s)", (list(memory_ids),)
    )
    owed = {row[0] for row in await cur.fetchall()}
    return [m for m in memory_ids if m in owed]


async def hold(conn: AsyncConnection, memory_ids: Sequence[int], *, hold_s: float) -> None:
    """Keep the sweep off these entries for ``hold_s`` (a rebuild is about to extract them itself)."""
    await conn.execute(
        "UPDATE relation_outbox SET due_at = now() + make_interval(secs => %s) WHERE memory_id = ANY(%s)",
        (hold_s, list(memory_ids)),
    )


async def relay_failed(conn: AsyncConnection, memory_ids: Sequence[int]) -> None:
    """The write's relay could not send these: the next sweep sends them."""
    await conn.execute(
        "UPDATE relation_outbox SET due_at = now() WHERE memory_id = ANY(%s) AND due_at IS NULL",
        (list(memory_ids),),
    )


async def finish(conn: AsyncConnection, user_id: int, memory_id: int) -> None:
    """The memory's extraction is stored (or nothing is owed): drop its entry."""
    await conn.execute(
        "DELETE FROM relation_outbox WHERE user_id = %s AND memory_id = %s", (user_id, memory_id)
    )


async def owe_all(conn: AsyncConnection, user_id: int | None, *, hold_s: float) -> int:
    """Owe an extraction for every active memory (of ``user_id``, or everyone's); return how many.

    The entries fall due only after ``hold_s``: the caller extracts them itself
    meanwhile (renewing the hold with :func:`hold` as it goes), and the sweep
    finishes whatever it leaves undone. The memories are locked FOR KEY SHARE:
    one hard-deleted meanwhile is skipped instead of failing the foreign key.
    """
    cur = await conn.execute(
        """
        INSERT INTO relation_outbox (memory_id, user_id, due_at)
        SELECT id, user_id, now() + make_interval(secs => %(hold)s) FROM memories
        WHERE deleted_at IS NULL AND (%(user_id)s::bigint IS NULL OR user_id = %(user_id)s)
        FOR KEY SHARE
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
