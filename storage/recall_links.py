"""What recall needs to put the latest truth first: how its candidates relate to each other.

One round trip for a recall's candidate ids (see :mod:`memory.rules.latest`):

- the functional relation edges of the candidates whose extraction is done,
  and which candidates still owe one (the caller reads those with the rules);
- which of the shown matches a newer active memory named in ``downweights``;
- the pairs (shown match, candidate) whose cosine reaches ``near_cosine``.

Scoped by ``user_id`` like every query (SUPPLEMENT §1); only active rows count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from psycopg import AsyncConnection, sql

from . import sealed_relations
from .memory_sql import M_ACTIVE
from .scans import like_escape


@dataclass(frozen=True)
class RecallLinks:
    """How a recall's candidates relate: edges, owed extractions, downweights, near pairs."""

    #: ``(memory id, subject, predicate, object)`` of functional edges.
    edges: list[tuple[int, str, str, str]] = field(default_factory=list)
    #: Candidates whose relation extraction has not run yet.
    owed: set[int] = field(default_factory=set)
    #: ``(downweighted shown match, the newer active memory that named it)``.
    downweighted_by: list[tuple[int, int]] = field(default_factory=list)
    #: ``(shown match, candidate)`` pairs at or above the near cosine.
    near: list[tuple[int, int]] = field(default_factory=list)


async def recall_links(
    conn: AsyncConnection,
    user_id: int,
    *,
    shown: Sequence[int],
    candidates: Sequence[int],
    functional_patterns: Sequence[str],
    near_cosine: float | None,
) -> RecallLinks:
    """The links among ``candidates`` (``shown`` are the ones recall would return).

    ``functional_patterns``: LIKE patterns of the predicates to read (a trailing
    ``%`` only); empty reads no edges. ``near_cosine`` None skips the near pairs.
    """
    parts: list[sql.Composable] = [
        sql.SQL("""
        SELECT 'owed' AS kind, o.memory_id AS a, NULL::bigint AS b,
               NULL::text AS subject, NULL::text AS predicate, NULL::text AS object,
               NULL::bigint AS edge_id, NULL::bytea AS subject_sealed,
               NULL::bytea AS predicate_sealed, NULL::bytea AS object_sealed
        FROM relation_outbox o
        WHERE o.user_id = %(user_id)s AND o.memory_id = ANY(%(candidates)s)
        UNION ALL
        SELECT 'downweighted', d.memory_id, d.by_memory_id, NULL, NULL, NULL,
               NULL, NULL, NULL, NULL
        FROM memory_downweights d JOIN memories m ON m.id = d.by_memory_id
        WHERE d.user_id = %(user_id)s AND d.memory_id = ANY(%(shown)s)
          AND m.user_id = %(user_id)s AND {active}
        """).format(active=sql.SQL(M_ACTIVE))
    ]
    if functional_patterns:
        parts.append(
            sql.SQL("""
            SELECT 'edge', r.memory_id, NULL, r.subject, r.predicate, r.object,
                   r.id, r.subject_sealed, r.predicate_sealed, r.object_sealed
            FROM memory_relations r
            WHERE r.user_id = %(user_id)s AND r.memory_id = ANY(%(candidates)s)
              AND {predicate_matches}
            """).format(predicate_matches=sealed_relations.PREDICATE_MATCHES)
        )
    if near_cosine is not None:
        parts.append(
            sql.SQL("""
            SELECT 'near', a.id, b.id, NULL, NULL, NULL, NULL, NULL, NULL, NULL
            FROM memories a JOIN memories b
              ON b.id = ANY(%(candidates)s) AND b.id <> a.id AND b.user_id = %(user_id)s
            WHERE a.id = ANY(%(shown)s) AND a.user_id = %(user_id)s
              AND (a.embedding <=> b.embedding) <= %(near_distance)s
            """)
        )
    cur = await conn.execute(
        sql.SQL(" UNION ALL ").join(parts),
        {
            "user_id": user_id,
            "shown": list(shown),
            "candidates": list(candidates),
            "patterns": [like_escape(p) for p in functional_patterns],
            **_keyed(user_id, functional_patterns),
            "near_distance": 1.0 - near_cosine if near_cosine is not None else None,
        },
    )
    links = RecallLinks()
    for kind, a, b, subject, predicate, obj, edge_id, *sealed in await cur.fetchall():
        if kind == "owed":
            links.owed.add(a)
        elif kind == "downweighted":
            links.downweighted_by.append((a, b))
        elif kind == "edge":
            s, p, o = sealed_relations.opened(
                user_id, edge_id, (subject, predicate, obj), (sealed[0], sealed[1], sealed[2])
            )
            links.edges.append((a, s, p, o))
        else:
            links.near.append((a, b))
    # An owed memory's stored edges are missing or stale: the caller extracts it anew.
    links.edges[:] = [e for e in links.edges if e[0] not in links.owed]
    return links


def _keyed(user_id: int, patterns: Sequence[str]) -> dict[str, list[str]]:
    """The parameters matching sealed edges' predicates (storage.sealed_relations)."""
    keyed = sealed_relations.predicate_patterns(user_id, patterns)
    return {"sealed_exact": keyed.exact, "sealed_prefixes": keyed.prefixes}
