"""SQL fragments every query over ``memories`` shares."""

from __future__ import annotations

from .rows import select_list

#: The columns of a :class:`~storage.rows.MemoryRow`, bare and under the alias ``m``.
COLUMNS = select_list()
M_COLUMNS = select_list(prefix="m.")

#: A row recall, listing and counting may show: not forgotten, not expired.
ACTIVE = "deleted_at IS NULL AND (expires_at IS NULL OR expires_at > now())"
M_ACTIVE = "m.deleted_at IS NULL AND (m.expires_at IS NULL OR m.expires_at > now())"


#: Users with at most this many rows are searched exactly (every active row's
#: distance, read through a ``user_id`` btree), users with more through the HNSW
#: index with pgvector's iterative scan. A filtered HNSW scan steps over every
#: other user's rows near the query: for a user holding 0.1% of a 1.1M-row table
#: it returned 40 rows only after visiting tens of thousands, slower than an exact
#: scan of all that user's rows, and not all the nearest (BENCHMARKS.md, "issue 16,
#: many tenants"). An exact scan costs a few microseconds a row, so it stays at or
#: under a lone user's HNSW search up to a few thousand rows.
EXACT_SEARCH_MAX_ROWS = 5000

#: The user's row count (not soft-deleted), from the per-user term totals that the
#: write triggers keep (migration 0002): one primary-key read, where a ``count(*)``
#: over a large user's rows would cost milliseconds. An uncorrelated subquery, so
#: PostgreSQL evaluates it once per statement; compared with a constant in a
#: branch's WHERE it becomes that branch's one-time filter, and the branch not
#: taken is never started.
USER_ROWS = "coalesce((SELECT t.docs FROM memory_term_totals t WHERE t.user_id = %(user_id)s), 0)"
#: The statements using these run unprepared (``prepare=False``): a prepared
#: statement soon runs one generic plan for every user, planned for a user of
#: average size, and at 1.1M rows that plan sorted the big user's 100,000 rows by
#: exact distance in the HNSW branch (108 ms against 9). Planned each time, the
#: branch is planned for this user's row estimate (~0.2 ms of planning).
#:
#: The one-time filters of the two plans (exactly one of them holds).
SMALL_USER = f"{USER_ROWS} <= {EXACT_SEARCH_MAX_ROWS}"
LARGE_USER = f"{USER_ROWS} > {EXACT_SEARCH_MAX_ROWS}"


def nearest_ids(*, distance_to: str, filters: str) -> str:
    """A subquery giving the ids of the user's ``%(k)s`` rows nearest ``distance_to``.

    ``filters``: extra conditions on ``m`` (activity, tags), joined by AND. For a
    small user (:data:`EXACT_SEARCH_MAX_ROWS`) every row of theirs is read
    through the ``user_id`` btrees and ordered by distance (``OFFSET 0`` keeps
    the planner from turning that back into an HNSW scan); for a large one the
    HNSW index scan with the same filters.
    """
    return f"""
        (SELECT m.id FROM memories m
         WHERE m.user_id = %(user_id)s AND {filters} AND {LARGE_USER}
         ORDER BY m.embedding <=> {distance_to}
         LIMIT %(k)s)
        UNION ALL
        (SELECT mine.id
         FROM (SELECT m.id, m.embedding FROM memories m
               WHERE m.user_id = %(user_id)s AND {filters} AND {SMALL_USER}
               OFFSET 0) mine
         ORDER BY mine.embedding <=> {distance_to}
         LIMIT %(k)s)
    """
