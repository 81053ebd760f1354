"""Recall's hops: memories stored next to a match in its session, or linked to it in the graph.

A question's evidence is often spread over memories that do not each look like
the question. :func:`session_neighbours`: for each seed (a match recall is
about to return), the ``window`` active memories stored just before and just
after it with the same ``session_id``, in id order (the order they were stored
in), through ``memories_user_session`` (migration 0018). :func:`graph_neighbours`:
the memories whose extracted relations name a person or thing the seeds'
relations name, through the ``memory_relations`` indexes (:func:`graph_linked`
scores them, :func:`graph_rows` reads the ones the caller keeps). Each is one
statement for all seeds, with every returned memory's cosine to the query.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.rows import dict_row

from . import sealed_relations, sealed_rows
from .memory_search import tsquery_term
from .memory_sql import M_ACTIVE, M_COLUMNS
from .rows import ScoredMemoryRow, deferred_row, scored_row

_ACTIVE_N = sql.SQL("n.deleted_at IS NULL AND (n.expires_at IS NULL OR n.expires_at > now())")
_M_ACTIVE = sql.SQL(M_ACTIVE)
_M_COLUMNS = sql.SQL(M_COLUMNS)


@dataclass(frozen=True)
class Neighbour:
    """A memory a hop reached from ``seed``, scored against the query."""

    scored: ScoredMemoryRow
    seed: int
    #: Its relation edges ``(subject, predicate, object)`` (the graph hop's only).
    edges: tuple[tuple[str, str, str], ...] = ()
    #: A newer active memory named it in ``downweights`` (the graph hop's only).
    downweighted: bool = False


async def session_neighbours(
    conn: AsyncConnection,
    user_id: int,
    seeds: Sequence[int],
    query_embedding: Any,
    *,
    window: int,
    tags: Sequence[str] = (),
) -> list[Neighbour]:
    """Up to ``window`` memories on each side of each seed in its session (active, with
    ``tags`` when given), nearest seed first; a memory next to two seeds comes once."""
    if not seeds or window < 1:
        return []
    tag_filter = sql.SQL("AND n.tags && %(tags)s") if tags else sql.SQL("")
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(
        sql.SQL("""
        SELECT DISTINCT ON (m.id) {columns}, near.seed,
               1 - (m.embedding <=> %(q)b) AS cosine,
               CASE WHEN m.context_centroid IS NULL THEN 0
                    ELSE greatest(0, 1 - (m.context_centroid <=> %(q)b)) END AS context_match
        FROM memories s
        CROSS JOIN LATERAL (
            (SELECT n.id, s.id AS seed FROM memories n
             WHERE n.user_id = %(user_id)s AND n.session_id = s.session_id AND n.id < s.id
               AND {active_n} {tag_filter}
             ORDER BY n.id DESC LIMIT %(window)s)
            UNION ALL
            (SELECT n.id, s.id AS seed FROM memories n
             WHERE n.user_id = %(user_id)s AND n.session_id = s.session_id AND n.id > s.id
               AND {active_n} {tag_filter}
             ORDER BY n.id LIMIT %(window)s)
        ) near
        JOIN memories m ON m.id = near.id AND m.user_id = %(user_id)s
        WHERE s.id = ANY(%(seeds)s) AND s.user_id = %(user_id)s AND s.session_id IS NOT NULL
        ORDER BY m.id, array_position(%(seeds)s, near.seed)
        """).format(columns=_M_COLUMNS, active_n=_ACTIVE_N, tag_filter=tag_filter),
        {
            "q": query_embedding,
            "user_id": user_id,
            "seeds": list(seeds),
            "window": window,
            "tags": sealed_rows.tag_filter(user_id, tags),
        },
    )
    return [
        Neighbour(
            scored_row(d),
            int(d["seed"]),
        )
        for d in await cur.fetchall()
    ]


@dataclass(frozen=True)
class Linked:
    """A memory whose relations name an entity a seed's relations name, scored against
    the query; not read whole (the caller picks which to read)."""

    id: int
    seed: int
    #: The seed's 1-based place among the seeds.
    place: int
    cosine: float
    #: Sum of the weights of the query's terms the memory contains (0 when none).
    matched: float
    #: The text's length in characters (its lexical share is scaled by it, issue 28).
    length: int = 0


async def graph_linked(
    conn: AsyncConnection,
    user_id: int,
    seeds: Sequence[int],
    query_embedding: Any,
    *,
    skip_entity: str,
    skip_ids: Sequence[int],
    max_entities: int,
    per_entity: int,
    min_cosine: float,
    terms: Sequence[tuple[str, float]],
    tags: Sequence[str] = (),
) -> list[Linked]:
    """The memories whose relations name an entity the seeds' relations name, with their
    cosine to the query and the weight of the ``terms`` (term, weight) they contain;
    the first seed's first, then by id. The caller ranks them (recall's fused score)
    and reads the ones it keeps with :func:`graph_rows`.

    The entities are the subjects and objects of the seeds' edges (matched
    case-insensitively, as ``query_relations`` does) but ``skip_entity`` (the
    user, whom nearly every first-person fact names), at most ``max_entities`` of
    them, the first seed's first; for each, the ``per_entity`` newest memories
    naming it as subject and as object (indexes ``memory_relations_subject`` and
    ``_object``). Only active ones, with ``tags`` when given, at least
    ``min_cosine`` from the query, and neither a seed nor one of ``skip_ids``; a
    memory reached from two seeds counts for the first.
    """
    if not seeds:
        return []
    tag_filter = sql.SQL("AND m.tags && %(tags)s") if tags else sql.SQL("")
    query = sql.SQL("""
        WITH named AS (
            SELECT DISTINCT ON (x.entity) x.entity, e.memory_id AS seed,
                   array_position(%(seeds)s, e.memory_id) AS place, e.id AS edge, x.side
            -- The seeds' edges by memory_relations_memory (OFFSET 0: the user_id
            -- test otherwise drew in an index over all the user's edges). The user is
            -- named inside too: Citus routes a statement to one node only when every
            -- distributed table in it names the user itself.
            FROM (SELECT * FROM memory_relations
                  WHERE memory_id = ANY(%(seeds)s) AND user_id = %(user_id)s OFFSET 0) e
            CROSS JOIN LATERAL (VALUES (lower(e.subject), 0), (lower(e.object), 1)) AS x(entity, side)
            WHERE e.user_id = %(user_id)s AND x.entity <> ALL(%(skip)s)
            ORDER BY x.entity, place, edge, x.side
        ), entities AS (
            -- A seed's entities in the order its edges name them (not by the entity's
            -- text: a sealed edge's entity is a keyed hash, and the pick must not change).
            SELECT entity, seed, place FROM named ORDER BY place, edge, side LIMIT %(entities)s
        ), linked AS (
            SELECT DISTINCT ON (r.memory_id) r.memory_id AS id, en.seed, en.place
            FROM entities en
            -- "+ 0": the entity's own rows by its index, then the newest of them;
            -- ordered by memory_id itself, PostgreSQL walked memory_relations_memory
            -- backwards through every user's edges until it met 20 (1.8 ms an entity
            -- at 10k memories, 16 ms a recall at p90).
            CROSS JOIN LATERAL (
                (SELECT s.memory_id FROM memory_relations s
                 WHERE s.user_id = %(user_id)s AND lower(s.subject) = en.entity
                 ORDER BY s.memory_id + 0 DESC LIMIT %(per_entity)s)
                UNION
                (SELECT o.memory_id FROM memory_relations o
                 WHERE o.user_id = %(user_id)s AND lower(o.object) = en.entity
                 ORDER BY o.memory_id + 0 DESC LIMIT %(per_entity)s)
            ) r
            WHERE r.memory_id <> ALL(%(seeds)s) AND r.memory_id <> ALL(%(skip_ids)s)
            ORDER BY r.memory_id, en.place
        ), scored AS (
            -- A primary-key lookup per linked row, filtered after it (OFFSET 0
            -- keeps the filters out of the lookup): on a fresh store's statistics
            -- PostgreSQL otherwise read the user's active rows once per linked row
            -- (10-14 ms instead of 1-2 on 1,600 memories).
            SELECT linked.id, linked.seed, linked.place,
                   1 - (m.embedding <=> %(q)b) AS cosine,
                   -- One text for any number of terms, so the statement is prepared
                   -- once per connection (a few dozen linked rows: the per-row cost of
                   -- the arrays over inline CASEs does not show).
                   (SELECT coalesce(sum(t.weight), 0) FROM unnest(%(tq)s::tsquery[],
                           %(tw)s::float8[]) AS t(query, weight)
                    WHERE coalesce(m.sealed_search, m.text_search) @@ t.query) AS matched,
                   coalesce(m.text_chars, length(m.text)) AS length
            FROM linked CROSS JOIN LATERAL (
                SELECT * FROM memories m
                WHERE m.id = linked.id AND m.user_id = %(user_id)s OFFSET 0
            ) m
            WHERE m.user_id = %(user_id)s AND {active} {tag_filter}
        )
        SELECT id, seed, place, cosine, matched, length FROM scored
        WHERE cosine >= %(floor)s
        ORDER BY place, id
        """).format(active=_M_ACTIVE, tag_filter=tag_filter)
    cur = await conn.execute(
        query,
        {
            "tq": [tsquery_term(term) for term, _weight in terms],
            "tw": [float(weight) for _term, weight in terms],
            "q": query_embedding,
            "user_id": user_id,
            "seeds": list(seeds),
            "skip": sealed_relations.phrase_keys(user_id, [skip_entity], fixed=True),
            "skip_ids": list(skip_ids),
            "entities": max_entities,
            "per_entity": per_entity,
            "floor": min_cosine,
            "tags": sealed_rows.tag_filter(user_id, tags),
        },
    )
    return [
        Linked(int(i), int(seed), int(place), float(cosine), float(matched), int(length))
        for i, seed, place, cosine, matched, length in await cur.fetchall()
    ]


async def graph_rows(
    conn: AsyncConnection, user_id: int, picked: Sequence[Linked], query_embedding: Any
) -> list[Neighbour]:
    """The ``picked`` linked memories read whole, in their order, each with its relation
    edges and whether a newer active memory downweights it (asked of these few rows
    only: as a filter on every linked row it doubled the statement's planning and
    execution time). A memory gone since it was linked is left out."""
    if not picked:
        return []
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(
        sql.SQL("""
        SELECT {columns},
               CASE WHEN m.context_centroid IS NULL THEN 0
                    ELSE greatest(0, 1 - (m.context_centroid <=> %(q)b)) END AS context_match,
               re.edges, re.edge_ids, re.sealed_edges,
               EXISTS (
                   SELECT 1 FROM memory_downweights d JOIN memories b ON b.id = d.by_memory_id
                   WHERE d.user_id = %(user_id)s AND d.memory_id = m.id
                     AND b.user_id = %(user_id)s AND b.deleted_at IS NULL
                     AND (b.expires_at IS NULL OR b.expires_at > now())) AS downweighted
        -- A primary-key lookup per picked id, filtered after it (OFFSET 0), as in
        -- graph_linked: a fresh store's statistics otherwise drew in the user's rows.
        FROM unnest(%(ids)s::int8[]) AS p(id) CROSS JOIN LATERAL (
            SELECT * FROM memories m WHERE m.id = p.id AND m.user_id = %(user_id)s OFFSET 0
        ) m
        -- The row's edges, with their ids and sealed phrases (storage.sealed_relations).
        CROSS JOIN LATERAL (
            SELECT coalesce(array_agg(ARRAY[r.subject, r.predicate, r.object] ORDER BY r.id),
                            '{{}}') AS edges,
                   coalesce(array_agg(r.id ORDER BY r.id), '{{}}') AS edge_ids,
                   coalesce(array_agg(ARRAY[r.subject_sealed, r.predicate_sealed,
                                            r.object_sealed] ORDER BY r.id), '{{}}') AS sealed_edges
            FROM memory_relations r WHERE r.memory_id = m.id AND r.user_id = %(user_id)s
        ) re
        WHERE m.user_id = %(user_id)s AND {active}
        """).format(columns=_M_COLUMNS, active=_M_ACTIVE),
        {"q": query_embedding, "user_id": user_id, "ids": [p.id for p in picked]},
    )
    read = {int(d["id"]): d for d in await cur.fetchall()}
    return [
        Neighbour(
            ScoredMemoryRow(deferred_row(d), p.cosine, float(d["context_match"]), p.matched),
            p.seed,
            _opened_edges(user_id, d),
            bool(d["downweighted"]),
        )
        for p in picked
        if (d := read.get(p.id)) is not None
    ]


def _opened_edges(user_id: int, d: dict[str, Any]) -> tuple[tuple[str, str, str], ...]:
    """A read row's edges ``(subject, predicate, object)``, sealed ones opened."""
    return tuple(
        sealed_relations.opened(user_id, int(i), (e[0], e[1], e[2]), (x[0], x[1], x[2]))
        for e, i, x in zip(d["edges"], d["edge_ids"], d["sealed_edges"], strict=True)
    )
