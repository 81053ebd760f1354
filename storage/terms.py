"""The per-user term statistics (``memory_terms``, ``memory_term_totals``), kept by the writes.

Recall weighs a lexical match by how rare each word is in the user's store (IDF,
migration 0002): ``memory_term_totals.docs`` counts the user's counted rows (not
soft-deleted; expiry is a matter of time and is not tracked) and
``memory_terms.docs`` how many of them contain each term. A term no counted row
contains has no entry. Until migration 0021 triggers on ``memories`` kept them;
now every write that changes which rows count, or their words, does it itself in
its own transaction (issue 32: Citus refuses a table with triggers), through the
two functions here:

- :func:`lock_counts`, before the write touches any of the user's memory rows;
- :func:`apply`, after it, with the :class:`TermChanges` its statements returned
  (each write statement returns the terms of the rows it made count or stop
  counting: :data:`CHANGED_TERMS` for an update, the row's own terms otherwise).

The terms come from the stored ``text_search``, or for a sealed row (issue 34,
migration 0023) from ``sealed_search``: the keyed hashes of the same lexemes,
computed by the application (``storage.sealed_rows``). Both feed the same
:class:`TermChanges`; nothing else in the statistics changes.

**No deadlock.** :func:`lock_counts` locks the user's ``memory_term_totals`` row
(creating it if need be) and every transaction that writes or locks a user's
memory rows through ``storage`` calls it first; the row stays locked to the
commit. So a transaction waiting for that lock holds no lock on the user's
memory rows, outbox entries or terms yet, and the one holding it never waits for
it: two writers of one user queue on the totals row instead of each holding
something the other needs (what the commit-time fold of migration 0002 achieved
by locking the totals row first, then the terms in sorted order). The terms are
still written in sorted order. Readers never lock these rows: recall is not held
up. A write of several users (an import) locks their rows in user id order,
before any write. The locks a write takes before this one (the idempotency
key's advisory lock, the import lock) every such writer takes first too, never
after it; deleting an account locks the totals row before the account
(:func:`lock_existing_counts`), since its cascade reaches that row last.

**The release before 0021** (a rolling upgrade): its processes still rely on the
triggers, which 0021 keeps for them; they step aside in a transaction that has
called :func:`lock_counts` (it sets :data:`BY_STATEMENT` for the transaction), so
a row is counted once, by whichever code wrote it. docs/scaling.md ("What needs
porting") says when they go.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from psycopg import AsyncConnection, pq, sql

#: Set (transaction-local) by :func:`lock_counts`: migration 0021's triggers then
#: leave this transaction's rows to the statements here.
BY_STATEMENT = "ownsona.terms_by_statement"

#: The RETURNING columns of an UPDATE of ``memories`` that may change what counts
#: (PostgreSQL 18's ``old``/``new``): the terms the row stops counting with, and
#: those it counts with now; NULL when nothing changed for the statistics
#: (salience, confirmations, vectors ...). Fold them with :meth:`TermChanges.add_update`.
CHANGED_TERMS = """
    CASE WHEN old.deleted_at IS NULL
          AND (new.deleted_at IS NOT NULL
               OR coalesce(old.sealed_search, old.text_search)
                  IS DISTINCT FROM coalesce(new.sealed_search, new.text_search))
         THEN tsvector_to_array(coalesce(old.sealed_search, old.text_search)) END AS lost_terms,
    CASE WHEN new.deleted_at IS NULL
          AND (old.deleted_at IS NOT NULL
               OR coalesce(old.sealed_search, old.text_search)
                  IS DISTINCT FROM coalesce(new.sealed_search, new.text_search))
         THEN tsvector_to_array(coalesce(new.sealed_search, new.text_search)) END AS gained_terms
"""

#: The RETURNING column of an INSERT or DELETE of ``memories``: the row's terms if it counts.
ROW_TERMS = (
    "CASE WHEN deleted_at IS NULL"
    " THEN tsvector_to_array(coalesce(sealed_search, text_search)) END AS row_terms"
)

#: The contract step of 0021: the triggers of 0002 and 0005, their functions and
#: work tables, dropped once no process of the release before 0021 can write. The
#: move to Citus runs it before distributing (Citus refuses a table with triggers);
#: a later migration runs it on a single node. DROP TRIGGER waits for the writes
#: under way on ``memories`` and holds new ones meanwhile: run it under a
#: ``lock_timeout`` (and again if it times out).
DROP_TRIGGERS = """
DROP TRIGGER IF EXISTS memories_terms_insert ON memories;
DROP TRIGGER IF EXISTS memories_terms_update ON memories;
DROP TRIGGER IF EXISTS memories_terms_delete ON memories;
DROP TRIGGER IF EXISTS memories_relation_outbox_insert ON memories;
DROP TRIGGER IF EXISTS memories_relation_outbox_text ON memories;
DROP TRIGGER IF EXISTS memory_relations_outbox ON memory_relations;
DROP TABLE IF EXISTS memory_term_flush;
DROP TABLE IF EXISTS memory_term_deltas;
DROP FUNCTION IF EXISTS memory_terms_collect(), memory_terms_flush(), relation_outbox_inserted(),
    relation_outbox_text_changed(), relation_outbox_edges_restored();
"""

#: Terms per upsert statement (three parameters each, under PostgreSQL's 65,535).
_CHUNK = 20_000


class TermChanges:
    """What one user's writes in a transaction changed: counted rows and per-term row counts."""

    def __init__(self) -> None:
        self.rows = 0
        self.terms: Counter[str] = Counter()

    def __bool__(self) -> bool:
        """Whether there is anything to write."""
        return self.rows != 0 or any(self.terms.values())

    def gain(self, terms: Iterable[str] | None) -> None:
        """A row now counts, with these terms (None: it does not count; nothing to do)."""
        if terms is not None:
            self.rows += 1
            self.terms.update(set(terms))

    def lose(self, terms: Iterable[str] | None) -> None:
        """A row no longer counts; it counted with these terms (None: it did not count)."""
        if terms is not None:
            self.rows -= 1
            self.terms.subtract(set(terms))

    def add_update(self, lost: Sequence[str] | None, gained: Sequence[str] | None) -> None:
        """One row of an update's :data:`CHANGED_TERMS`."""
        self.lose(lost)
        self.gain(gained)


@asynccontextmanager
async def transaction(conn: AsyncConnection) -> AsyncIterator[None]:
    """The caller's transaction; one of its own for a write called alone in autocommit.

    The lock and the counts must share the write's transaction (a lone write
    between two autocommitted statements would count in one and write in another).
    """
    if conn.info.transaction_status == pq.TransactionStatus.IDLE:
        async with conn.transaction():
            yield
    else:
        yield


async def lock_counts(conn: AsyncConnection, user_ids: Iterable[int]) -> None:
    """Lock the users' totals rows to the end of the transaction (first, see the module).

    Also marks the transaction as counting by statement (:data:`BY_STATEMENT`).
    Both go out without waiting for an answer (psycopg's pipeline): no round trip
    of their own when the write that follows is sent in the same pipeline.
    """
    if conn.info.transaction_status == pq.TransactionStatus.IDLE:
        # Outside a transaction the lock and the mark would end with the statement.
        raise RuntimeError("lock_counts needs a transaction")
    await conn.execute("SELECT set_config(%s, 'on', true)", (BY_STATEMENT,))
    for user_id in sorted(set(user_ids)):
        # ON CONFLICT ... WHERE false: the existing row is locked, not rewritten.
        await conn.execute(
            "INSERT INTO memory_term_totals AS t (user_id, docs) VALUES (%s, 0)"
            " ON CONFLICT (user_id) DO UPDATE SET docs = t.docs WHERE false",
            (user_id,),
        )


async def lock_existing_counts(conn: AsyncConnection, user_id: int) -> None:
    """Lock the user's totals row if there is one (what deleting the account does first).

    No row is created: the user may be gone. Without a row, a writer that creates
    one meanwhile holds a key-share lock on the user, which the deletion's lock of
    the user waits for.
    """
    await conn.execute("SELECT 1 FROM memory_term_totals WHERE user_id = %s FOR UPDATE", (user_id,))


async def apply(conn: AsyncConnection, user_id: int, changes: TermChanges) -> None:
    """Add the changes to the user's counts (after :func:`lock_counts` in this transaction).

    A term whose count reaches 0 loses its entry. Up to three statements (more
    for a batch of over :data:`_CHUNK` distinct terms), none waiting for an
    answer: called in a pipeline (``async with conn.pipeline()``) beside the
    write's other statements they cost no round trip of their own.
    """
    deltas = sorted((t, d) for t, d in changes.terms.items() if d != 0)
    if changes.rows:
        await conn.execute(
            "UPDATE memory_term_totals SET docs = docs + %s WHERE user_id = %s",
            (changes.rows, user_id),
        )
    user = sql.Literal(user_id)
    for start in range(0, len(deltas), _CHUNK):
        chunk = deltas[start : start + _CHUNK]
        # Sorted by term: two writers of one user already queue on the totals
        # row, but the order costs nothing and keeps the rule of 0002.
        await conn.execute(
            sql.SQL(
                "INSERT INTO memory_terms AS t (user_id, term, docs) VALUES {}"
                " ON CONFLICT (user_id, term) DO UPDATE SET docs = t.docs + excluded.docs"
            ).format(sql.SQL(", ").join([sql.SQL("({}, %s, %s)").format(user)] * len(chunk))),
            [v for pair in chunk for v in pair],
        )
    fallen = [t for t, d in deltas if d < 0]
    if fallen:
        await conn.execute(
            "DELETE FROM memory_terms WHERE user_id = %s AND term = ANY(%s) AND docs <= 0",
            (user_id, fallen),
        )


async def recount(conn: AsyncConnection, user_id: int) -> None:
    """Count the user's statistics again from the rows.

    For rows written around the statements here: a store seeded by ``COPY``
    (the benchmarks) once the triggers are gone, or a repair. One user at a
    time, under the user's lock; each statement stays on the user's shard.
    """
    async with transaction(conn), conn.pipeline():
        await lock_counts(conn, [user_id])
        await conn.execute("DELETE FROM memory_terms WHERE user_id = %s", (user_id,))
        await conn.execute(
            "INSERT INTO memory_terms (user_id, term, docs)"
            " SELECT m.user_id, x.term, count(*)"
            " FROM memories m,"
            " unnest(tsvector_to_array(coalesce(m.sealed_search, m.text_search))) AS x(term)"
            " WHERE m.user_id = %s AND m.deleted_at IS NULL GROUP BY m.user_id, x.term",
            (user_id,),
        )
        await conn.execute(
            "UPDATE memory_term_totals SET docs = (SELECT count(*) FROM memories"
            " WHERE user_id = %(u)s AND deleted_at IS NULL) WHERE user_id = %(u)s",
            {"u": user_id},
        )


def from_rows(rows: Iterable[Any]) -> TermChanges:
    """The changes of rows returned with :data:`ROW_TERMS` as their last column, gained."""
    changes = TermChanges()
    for row in rows:
        changes.gain(row[-1])
    return changes
