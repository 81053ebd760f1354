"""SQL fragments every query over ``memories`` shares."""

from __future__ import annotations

from collections.abc import Mapping

from psycopg import sql

from .rows import select_list
from .sealed_rows import SEALED_COLUMNS

#: The columns of a :class:`~storage.rows.MemoryRow`, bare and under the alias ``m``.
#: With the sealed columns a sealed row is opened from, and its length
#: (storage.sealed_rows, migrations 0023 and 0024).
COLUMNS = select_list() + "".join(", " + c for c in SEALED_COLUMNS)
M_COLUMNS = select_list(prefix="m.") + "".join(", m." + c for c in SEALED_COLUMNS)

#: A row recall, listing and counting may show: not forgotten, not expired.
ACTIVE = "deleted_at IS NULL AND (expires_at IS NULL OR expires_at > now())"
M_ACTIVE = "m.deleted_at IS NULL AND (m.expires_at IS NULL OR m.expires_at > now())"


#: Users with at most this many rows are searched exactly (every active row's
#: distance, read through a ``user_id`` btree), whatever else the table holds. For
#: a lone user that is where an exact scan stops being cheaper than the HNSW index
#: (10k-row store, p50 of 60 queries, 2026-12-04: 1,000 rows 0.45 ms exact against
#: 0.58 ms HNSW; 2,000 rows 0.75 against 0.48; 5,000 rows 2.06 against 0.49).
EXACT_SEARCH_ROWS = 2000
#: Users with up to this many rows are searched exactly too while they hold less
#: than 1/``SMALL_SHARE`` of the table: a filtered HNSW scan steps over every other
#: user's rows near the query, so for a user holding 0.1% of a 1.1M-row table it
#: returned 40 rows only after visiting tens of thousands, slower than an exact scan
#: of all that user's rows, and not all the nearest (BENCHMARKS.md, "issue 16, many
#: tenants"). Above either bound: the HNSW index with pgvector's iterative scan.
EXACT_SEARCH_MAX_ROWS = 5000
SMALL_SHARE = 50

#: The user's row count (not soft-deleted), from the per-user term totals that the
#: write triggers keep (migration 0002): one primary-key read, where a ``count(*)``
#: over a large user's rows would cost milliseconds. An uncorrelated subquery, so
#: PostgreSQL evaluates it once per statement; compared with a constant in a
#: branch's WHERE it becomes that branch's one-time filter, and the branch not
#: taken is never started.
USER_ROWS = "coalesce((SELECT t.docs FROM memory_term_totals t WHERE t.user_id = %(user_id)s), 0)"
#: The row estimate of what the user's HNSW scan walks (-1 before the first
#: ANALYZE, when only the row bound applies), read the same way, once: on one node
#: the table's ``reltuples`` (kept by autovacuum's ANALYZE), on Citus the user's
#: shard's, read on the worker so the statement stays a router plan (migration
#: 0026, ``storage.citus_layout``).
TABLE_ROWS = "(SELECT ownsona_memories_rows(%(user_id)s))"
#: The statements using these run unprepared (``prepare=False``): a prepared
#: statement soon runs one generic plan for every user, planned for a user of
#: average size, and at 1.1M rows that plan sorted the big user's 100,000 rows by
#: exact distance in the HNSW branch (108 ms against 9). Planned each time, the
#: branch is planned for this user's row estimate (~0.2 ms of planning).
#: Statements whose caller has read both numbers already (recall's, after
#: ``query_term_stats``) send one branch instead (:func:`searched_exactly`,
#: :func:`for_user`).
#:
#: The one-time filters of the two plans (exactly one of them holds).
SMALL_USER = sql.SQL(
    "({user_rows} <= {exact_rows} OR ({user_rows} <= {exact_max_rows}"
    " AND {user_rows} * {small_share} < {table_rows}))"
).format(
    user_rows=sql.SQL(USER_ROWS),
    exact_rows=sql.Literal(EXACT_SEARCH_ROWS),
    exact_max_rows=sql.Literal(EXACT_SEARCH_MAX_ROWS),
    small_share=sql.Literal(SMALL_SHARE),
    table_rows=sql.SQL(TABLE_ROWS),
)
LARGE_USER = sql.SQL("NOT {}").format(SMALL_USER)


def searched_exactly(user_rows: int, table_rows: float) -> bool:
    """:data:`SMALL_USER` from the two numbers it reads (``USER_ROWS``, ``TABLE_ROWS``)."""
    return user_rows <= EXACT_SEARCH_ROWS or (
        user_rows <= EXACT_SEARCH_MAX_ROWS and user_rows * SMALL_SHARE < table_rows
    )


#: ``for_user`` of a statement whose user id and ``k`` stay parameters.
PLACEHOLDERS: Mapping[str, sql.Composable] = {
    "user_id": sql.Placeholder("user_id"),
    "k": sql.Placeholder("k"),
}


def for_user(*, user_id: int, k: int, exact: bool) -> Mapping[str, sql.Composable]:
    """The ``user_id`` and ``k`` of a one-branch search statement (``exact``:
    :func:`searched_exactly`) as sent, prepared: format its ``{user_id}`` and ``{k}``.

    A small user's keeps ``%(user_id)s``: its generic plan reads the user's rows
    through the ``user_id`` btrees, right for every small user. A large user's
    gets the id and ``%(k)s`` written in: a generic plan of ``user_id = $1`` is
    planned for a user of average size (the 108 ms sort above; the lexical side's
    ``id = ANY`` read all 10,000 rows of a big user through the ``user_id`` btree),
    and a partial own index is proved from the value only. With the value the plan
    is this user's, and with ``k`` too PostgreSQL keeps it instead of planning
    each call (a LIMIT it cannot see is costed as a tenth of the rows).
    """
    if exact:
        return PLACEHOLDERS
    return {"user_id": sql.Literal(int(user_id)), "k": sql.Literal(int(k))}


def _nearest_by_index(
    distance_to: sql.Composable, filters: sql.Composable, values: Mapping[str, sql.Composable]
) -> sql.Composed:
    return sql.SQL("""
        SELECT m.id FROM memories m
        WHERE m.user_id = {user_id} AND {filters}
        ORDER BY m.embedding <=> {distance_to}
        LIMIT {k}
    """).format(filters=filters, distance_to=distance_to, **values)


def _nearest_exactly(
    distance_to: sql.Composable, filters: sql.Composable, values: Mapping[str, sql.Composable]
) -> sql.Composed:
    # OFFSET 0 keeps the planner from turning the sort back into an HNSW scan.
    return sql.SQL("""
        SELECT mine.id
        FROM (SELECT m.id, m.embedding FROM memories m
              WHERE m.user_id = {user_id} AND {filters}
              OFFSET 0) mine
        ORDER BY mine.embedding <=> {distance_to}
        LIMIT {k}
    """).format(filters=filters, distance_to=distance_to, **values)


def nearest_ids(
    *,
    distance_to: sql.Composable,
    filters: sql.Composable,
    exact: bool | None = None,
    values: Mapping[str, sql.Composable] = PLACEHOLDERS,
) -> sql.Composed:
    """A subquery giving the ids of the user's ``k`` rows nearest ``distance_to``.

    ``filters``: extra conditions on ``m`` (activity, tags), joined by AND. For a
    small user (``exact``) every row of theirs is read through the ``user_id``
    btrees and ordered by distance; for a large one the HNSW index scan with the
    same filters. ``exact`` None: both, each behind its one-time filter, for a
    caller that has not read the user's size (run it unprepared). ``values``: the
    user id and ``k`` (:func:`for_user`; by default ``%(user_id)s`` and ``%(k)s``).
    """
    if exact is not None:
        return (_nearest_exactly if exact else _nearest_by_index)(distance_to, filters, values)
    return sql.SQL("""
        ({by_index})
        UNION ALL
        ({exactly})
    """).format(
        by_index=_nearest_by_index(
            distance_to, sql.SQL("{} AND {}").format(filters, LARGE_USER), values
        ),
        exactly=_nearest_exactly(
            distance_to, sql.SQL("{} AND {}").format(filters, SMALL_USER), values
        ),
    )
