"""Recall's searches over ``memories``: nearest vectors, weighted terms, both at once.

Every function takes a connection: the caller owns the transaction. Every
query is scoped by ``user_id`` (SUPPLEMENT §1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.rows import dict_row

from . import sealed_rows
from .memory_sql import (
    M_ACTIVE,
    M_COLUMNS,
    TABLE_ROWS,
    USER_ROWS,
    for_user,
    nearest_ids,
    searched_exactly,
)
from .rows import ScoredMemoryRow, scored_row

_M_ACTIVE = sql.SQL(M_ACTIVE)
_M_COLUMNS = sql.SQL(M_COLUMNS)
#: A row's lexical terms: keyed hashes for a sealed row (migration 0023), else its lexemes.
SEARCHED = sql.SQL("coalesce(m.sealed_search, m.text_search)")

#: The query vector, as every distance here reads it.
_Q = sql.SQL("%(q)b")


def _filters(tags: Sequence[str]) -> sql.Composable:
    """The conditions on ``m`` every candidate passes: active, and the tags when given."""
    return sql.SQL("{} AND m.tags && %(tags)s").format(_M_ACTIVE) if tags else _M_ACTIVE


def _tag_filter(tags: Sequence[str]) -> sql.Composable:
    """``AND`` the tags on ``m`` when given, else nothing."""
    return sql.SQL("AND m.tags && %(tags)s") if tags else sql.SQL("")


async def search_by_vector(
    conn: AsyncConnection,
    user_id: int,
    query_embedding: Any,
    *,
    candidates: int,
    tags: Sequence[str] = (),
) -> list[ScoredMemoryRow]:
    """The ``candidates`` active rows nearest to the query, nearest first.

    Exact for a small user, HNSW for a large one (:func:`~storage.memory_sql.nearest_ids`).
    """
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(
        sql.SQL("""
        WITH picked AS ({nearest})
        SELECT {columns},
               1 - (m.embedding <=> %(q)b) AS cosine,
               CASE WHEN m.context_centroid IS NULL THEN 0
                    ELSE greatest(0, 1 - (m.context_centroid <=> %(q)b)) END AS context_match
        FROM picked JOIN memories m ON m.id = picked.id AND m.user_id = %(user_id)s
        ORDER BY m.embedding <=> %(q)b
        """).format(
            nearest=nearest_ids(distance_to=_Q, filters=_filters(tags)), columns=_M_COLUMNS
        ),
        {
            "q": query_embedding,
            "user_id": user_id,
            "tags": sealed_rows.tag_filter(user_id, tags),
            "k": candidates,
        },
        prepare=False,  # a plan for this user's size (memory_sql.USER_ROWS)
    )
    return [scored_row(d) for d in await cur.fetchall()]


#: Text search configuration of ``memories.text_search`` (migration 0002); queries
#: must be reduced to terms by the same one.
TEXT_SEARCH_CONFIG = "english"


@dataclass(frozen=True)
class QueryTermStats:
    """A query reduced to search terms, and how common each is in the user's store."""

    #: The user's counted rows (not soft-deleted).
    total: int
    #: (term, rows containing it), one per distinct term of the query, sorted by term.
    terms: tuple[tuple[str, int], ...]
    #: Whether the user's searches read every row of theirs, not an index
    #: (:func:`~storage.memory_sql.searched_exactly`): ``exact`` of the searches below.
    exact: bool


async def query_term_stats(conn: AsyncConnection, user_id: int, query: str) -> QueryTermStats:
    """The query's search terms and their row counts in the user's store (migration 0002),
    and how the user's rows are searched.

    Sealed (docs/at-rest.md): the terms are the keyed hashes of the lexemes, in the
    lexemes' order, so that what follows weighs and probes them exactly as it would
    the lexemes; the query text goes to PostgreSQL for ``to_tsvector`` only.
    """
    if sealed_rows.searches_sealed(user_id):
        return await _sealed_query_term_stats(conn, user_id, query)
    cur = await conn.execute(
        sql.SQL("""
        SELECT {user_rows}, {table_rows},
               coalesce(array_agg(q.term ORDER BY q.term), '{{}}'),
               coalesce(array_agg(coalesce(s.docs, 0) ORDER BY q.term), '{{}}')
        FROM unnest(tsvector_to_array(to_tsvector(%(config)s::regconfig, %(query)s))) AS q(term)
        LEFT JOIN memory_terms s ON s.user_id = %(user_id)s AND s.term = q.term
        """).format(user_rows=sql.SQL(USER_ROWS), table_rows=sql.SQL(TABLE_ROWS)),
        {"user_id": user_id, "config": TEXT_SEARCH_CONFIG, "query": query},
    )
    row = await cur.fetchone()
    assert row is not None
    total, table_rows, terms, docs = row
    return QueryTermStats(
        int(total),
        tuple(zip(terms, (int(d) for d in docs), strict=True)),
        searched_exactly(int(total), float(table_rows)),
    )


async def _sealed_query_term_stats(
    conn: AsyncConnection, user_id: int, query: str
) -> QueryTermStats:
    cur = await conn.execute(
        "SELECT tsvector_to_array(to_tsvector(%s::regconfig, %s))", (TEXT_SEARCH_CONFIG, query)
    )
    row = await cur.fetchone()
    assert row is not None
    keyed = sealed_rows.query_terms(user_id, row[0])
    by_lexeme = sorted(keyed, key=lambda k: keyed[k])
    cur = await conn.execute(
        sql.SQL("""
        SELECT {user_rows}, {table_rows},
               coalesce(array_agg(coalesce(s.docs, 0) ORDER BY q.i), '{{}}')
        FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS q(term, i)
        LEFT JOIN memory_terms s ON s.user_id = %(user_id)s AND s.term = q.term
        """).format(user_rows=sql.SQL(USER_ROWS), table_rows=sql.SQL(TABLE_ROWS)),
        {"user_id": user_id, "terms": by_lexeme},
    )
    counted = await cur.fetchone()
    assert counted is not None
    total, table_rows, docs = counted
    return QueryTermStats(
        int(total),
        tuple(zip(by_lexeme, (int(d) for d in docs), strict=True)),
        searched_exactly(int(total), float(table_rows)),
    )


def tsquery_term(term: str) -> str:
    """One already-normalised term as a ``tsquery`` literal (quotes and backslashes doubled)."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def _lexical_score(terms: Sequence[tuple[str, float]]) -> tuple[sql.Composable, dict[str, Any]]:
    """SQL for the sum of the weights of the ``terms`` a row ``m`` contains, and its parameters.

    One inline ``CASE`` per term (a binary search in the row's sorted lexemes):
    about twice as fast per row as a subquery over arrays, which matters for
    the lexical probe, the one place that scores hundreds of rows.
    """
    if not terms:
        return sql.SQL("0::float8"), {}
    parts = []
    params: dict[str, Any] = {}
    for i, (term, weight) in enumerate(terms):
        parts.append(
            sql.SQL("CASE WHEN {} @@ {}::tsquery THEN {}::float8 ELSE 0 END").format(
                SEARCHED, sql.Placeholder(f"tq{i}"), sql.Placeholder(f"tw{i}")
            )
        )
        params[f"tq{i}"] = tsquery_term(term)
        params[f"tw{i}"] = float(weight)
    return sql.SQL("({})").format(sql.SQL(" + ").join(parts)), params


async def lexical_candidates(
    conn: AsyncConnection,
    user_id: int,
    *,
    terms: Sequence[tuple[str, float]],
    probe: Sequence[str],
    candidates: int,
    exact: bool,
    tags: Sequence[str] = (),
) -> list[int]:
    """Ids of the ``candidates`` active rows scoring highest on the weighted ``terms``.

    Only rows containing at least one ``probe`` term are read (GIN index); the
    user, deletion, expiry and tag filters apply in SQL, as on the vector side.
    A row's score is the sum of the weights of the ``terms`` it contains.
    ``exact``: the user is searched exactly (:attr:`QueryTermStats.exact`).
    """
    if not terms or not probe or candidates <= 0:
        return []
    score, params = _lexical_score(terms)
    # As on the vector side (memory_sql.nearest_ids), a small user's rows are read
    # through the user_id btrees and tested one by one: the GIN index's posting
    # list of a common word spans every user's rows (6.7 ms against 0.2 ms for a
    # lone user of 1,000 rows, among 1.1M rows: BENCHMARKS.md, issue 16).
    values = for_user(user_id=user_id, k=candidates, exact=exact)
    matching = (
        sql.SQL("""
        (SELECT m.id, m.text_search, m.sealed_search FROM memories m
         WHERE m.user_id = {user_id} AND {active} {tag_filter}
         OFFSET 0) m
        WHERE {searched} @@ %(probe)s::tsquery
        """)
        if exact
        else sql.SQL("""
        memories m
        WHERE m.user_id = {user_id} AND {active} {tag_filter}
          AND {indexed} @@ %(probe)s::tsquery
        """)
    ).format(
        active=_M_ACTIVE,
        tag_filter=_tag_filter(tags),
        user_id=values["user_id"],
        searched=SEARCHED,
        # The GIN index of the column the user's terms are in (a sealed call's: keyed).
        indexed=sql.SQL(
            "m.sealed_search" if sealed_rows.searches_sealed(user_id) else "m.text_search"
        ),
    )
    query = sql.SQL(
        "SELECT m.id FROM {matching} ORDER BY {score} DESC, m.id DESC LIMIT {k}"
    ).format(matching=matching, score=score, k=values["k"])
    cur = await conn.execute(
        query,
        {
            **params,
            "user_id": user_id,
            "tags": sealed_rows.tag_filter(user_id, tags),
            "probe": " | ".join(tsquery_term(t) for t in probe),
            "k": candidates,
        },
    )
    return [int(r[0]) for r in await cur.fetchall()]


async def search_hybrid(
    conn: AsyncConnection,
    user_id: int,
    query_embedding: Any,
    *,
    candidates: int,
    exact: bool,
    terms: Sequence[tuple[str, float]] = (),
    lexical_ids: Sequence[int] = (),
    tags: Sequence[str] = (),
) -> list[ScoredMemoryRow]:
    """The vector candidates of a query and ``lexical_ids``, with cosine and lexical score.

    The ``candidates`` active rows nearest to the query (exact for a small user,
    HNSW for a large one: :func:`~storage.memory_sql.nearest_ids`), joined by the
    rows of ``lexical_ids`` (from :func:`lexical_candidates`) that still pass
    the same filters: the user, not deleted, not expired, the tags. A row's
    lexical score (:attr:`~storage.rows.ScoredMemoryRow.matched`) is the sum of the
    weights of the ``terms`` it contains, whichever side it came from. ``exact``: the user is searched exactly
    (:attr:`QueryTermStats.exact`).
    """
    score, params = _lexical_score(terms)
    values = for_user(user_id=user_id, k=candidates, exact=exact)
    lexical_side = (
        sql.SQL("""
            UNION
            SELECT m.id FROM memories m
            WHERE m.id = ANY(%(lexical_ids)s) AND m.user_id = {user_id} AND {active} {tag_filter}
        """).format(user_id=values["user_id"], active=_M_ACTIVE, tag_filter=_tag_filter(tags))
        if lexical_ids
        else sql.SQL("")
    )
    nearest = nearest_ids(distance_to=_Q, filters=_filters(tags), exact=exact, values=values)
    query = sql.SQL("""
            WITH picked AS (
                ({nearest})
                {lexical_side}
            )
            SELECT {columns},
                   1 - (m.embedding <=> %(q)b) AS cosine,
                   CASE WHEN m.context_centroid IS NULL THEN 0
                        ELSE greatest(0, 1 - (m.context_centroid <=> %(q)b)) END AS context_match,
                   {score} AS matched
            FROM picked JOIN memories m ON m.id = picked.id AND m.user_id = {user_id}
            """).format(
        nearest=nearest,
        lexical_side=lexical_side,
        columns=_M_COLUMNS,
        score=score,
        user_id=values["user_id"],
    )
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(
        query,
        {
            **params,
            "q": query_embedding,
            "user_id": user_id,
            "tags": sealed_rows.tag_filter(user_id, tags),
            "k": candidates,
            "lexical_ids": list(lexical_ids),
        },
    )
    return [scored_row(d) for d in await cur.fetchall()]


#: Rows of each kind (dated, undated, with a validity span) a time window reads, the
#: latest first, before their distance to the query is taken: a window of years in a
#: large store costs this many rows, not all of them.
WINDOW_SCAN_ROWS = 2000


async def window_candidates(
    conn: AsyncConnection,
    user_id: int,
    query_embedding: Any,
    *,
    start: datetime | None,
    end: datetime | None,
    candidates: int,
    tags: Sequence[str] = (),
) -> list[int]:
    """Ids of the ``candidates`` active rows nearest the query among those of a time window.

    A row is in ``[start, end)`` (None: open) when its validity span
    (``valid_from`` .. ``valid_to``) meets the window, or, without a span, when
    its ``occurred_at`` (else its ``created_at``) falls inside. Each kind is read
    through its own index, the latest first, at most ``WINDOW_SCAN_ROWS`` rows.
    """
    query = sql.SQL("""
        WITH near AS (
            (SELECT m.id, m.embedding FROM memories m
             WHERE m.user_id = %(user_id)s AND {active} {tag_filter}
               AND m.occurred_at >= %(start)s AND m.occurred_at < %(end)s
               AND m.valid_from IS NULL AND m.valid_to IS NULL
             ORDER BY m.occurred_at DESC LIMIT %(scan)s)
            UNION ALL
            (SELECT m.id, m.embedding FROM memories m
             WHERE m.user_id = %(user_id)s AND {active} {tag_filter}
               AND m.created_at >= %(start)s AND m.created_at < %(end)s
               AND m.occurred_at IS NULL AND m.valid_from IS NULL AND m.valid_to IS NULL
             ORDER BY m.created_at DESC LIMIT %(scan)s)
            UNION ALL
            (SELECT m.id, m.embedding FROM memories m
             WHERE m.user_id = %(user_id)s AND {active} {tag_filter}
               AND (m.valid_from IS NOT NULL OR m.valid_to IS NOT NULL)
               AND coalesce(m.valid_from, '-infinity') < %(end)s
               AND coalesce(m.valid_to, 'infinity') >= %(start)s
             ORDER BY m.valid_from DESC NULLS LAST LIMIT %(scan)s)
        )
        SELECT id FROM near ORDER BY embedding <=> %(q)b LIMIT %(k)s
    """).format(active=_M_ACTIVE, tag_filter=_tag_filter(tags))
    cur = await conn.execute(
        query,
        {
            "user_id": user_id,
            "tags": sealed_rows.tag_filter(user_id, tags),
            "start": start if start is not None else "-infinity",
            "end": end if end is not None else "infinity",
            "scan": WINDOW_SCAN_ROWS,
            "q": query_embedding,
            "k": candidates,
        },
        prepare=False,
    )
    return [int(r[0]) for r in await cur.fetchall()]
