"""SQL of the relation graph (``memory_relations``; SUPPLEMENT §6).

Every function takes a connection and is scoped by ``user_id``: an edge
belongs to its source memory's user. Hard-deleting a memory removes its
edges (ON DELETE CASCADE); reads skip edges whose source memory is
soft-deleted or expired.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg import AsyncConnection, sql
from psycopg.rows import dict_row

from storage.sealing.scope import sealing_writes

from . import sealed_relations, sealed_rows
from .memory_sql import M_ACTIVE


@dataclass(frozen=True)
class SourceText:
    """A memory's text as the extraction job sees it."""

    id: int
    text: str
    deleted: bool


@dataclass(frozen=True)
class EdgeRow:
    """An edge with its source memory's current text."""

    id: int
    subject: str
    predicate: str
    object: str
    memory_id: int
    source_text: str


@dataclass(frozen=True)
class NewEdge:
    subject: str
    predicate: str
    object: str


async def source_text(
    conn: AsyncConnection, user_id: int, memory_id: int, *, lock: bool = False
) -> SourceText | None:
    """The memory's text; with ``lock``, held until the transaction ends (FOR SHARE).

    The lock keeps the text from changing between the check and the write of
    its edges; it does not block readers.
    """
    cur = await conn.execute(
        "SELECT id, text, deleted_at IS NOT NULL AS deleted, text_sealed FROM memories"
        " WHERE id = %s AND user_id = %s" + (" FOR SHARE" if lock else ""),
        (memory_id, user_id),
    )
    row = await cur.fetchone()
    if row is None:
        return None
    row_id, text, deleted, sealed = row
    return SourceText(row_id, sealed_rows.open_text(user_id, row_id, text, sealed), deleted)


async def delete_edges(conn: AsyncConnection, user_id: int, memory_id: int) -> int:
    """Remove the memory's edges; return how many there were."""
    cur = await conn.execute(
        "DELETE FROM memory_relations WHERE user_id = %s AND memory_id = %s", (user_id, memory_id)
    )
    return cur.rowcount


async def insert_edges(
    conn: AsyncConnection, user_id: int, memory_id: int, edges: Sequence[NewEdge]
) -> None:
    if not edges:
        return
    # A VALUES list, not INSERT ... SELECT FROM unnest(...): Citus routes the former to the
    # user's shard and pulls the latter through the coordinator (tests/citus/test_routing.py).
    keys = sealing_writes(user_id)
    if keys is None:
        await conn.execute(
            sql.SQL(
                "INSERT INTO memory_relations (user_id, memory_id, subject, predicate, object)"
                " VALUES {}"
            ).format(sql.SQL(", ").join([sql.SQL("(%s, %s, %s, %s, %s)")] * len(edges))),
            [v for e in edges for v in (user_id, memory_id, e.subject, e.predicate, e.object)],
        )
        return
    # Sealed (storage.sealed_relations): ids drawn first, each phrase bound to its edge.
    sealed = await sealed_relations.seal_new(
        conn, keys, [(e.subject, e.predicate, e.object) for e in edges]
    )
    await conn.execute(
        sql.SQL(
            "INSERT INTO memory_relations (id, user_id, memory_id, subject, predicate, object,"
            " subject_sealed, predicate_sealed, object_sealed, predicate_prefixes) VALUES {}"
        ).format(
            sql.SQL(", ").join([sql.SQL("(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)")] * len(edges))
        ),
        [
            v
            for e in sealed
            for v in (
                e.id,
                user_id,
                memory_id,
                e.subject,
                e.predicate,
                e.object,
                e.subject_sealed,
                e.predicate_sealed,
                e.object_sealed,
                e.predicate_prefixes,
            )
        ],
    )


async def edges_touching(
    conn: AsyncConnection, user_id: int, entities: Sequence[str], *, limit: int
) -> list[EdgeRow]:
    """Live edges whose subject or object is one of ``entities`` (lowercase), oldest first."""
    if not entities:
        return []
    return await _live_edges(conn, user_id, entities, None, limit=limit)


async def role_edges(
    conn: AsyncConnection,
    user_id: int,
    owners: Sequence[str],
    predicates: Sequence[str],
    *,
    limit: int,
) -> list[EdgeRow]:
    """Live edges with one of ``predicates`` that touch one of ``owners`` (lowercase)."""
    if not owners or not predicates:
        return []
    return await _live_edges(conn, user_id, owners, predicates, limit=limit)


async def _live_edges(
    conn: AsyncConnection,
    user_id: int,
    keys: Sequence[str],
    predicates: Sequence[str] | None,
    *,
    limit: int,
) -> list[EdgeRow]:
    """Live edges touching one of ``keys``, oldest first; with ``predicates``, only those."""
    # Sealed edges store keyed hashes of the phrases: the lookup sends both kinds.
    params: dict[str, object] = {
        "user_id": user_id,
        "keys": sealed_relations.phrase_keys(user_id, keys),
        "limit": limit,
    }
    only_predicates = sql.SQL("")
    if predicates is not None:
        only_predicates = sql.SQL("AND r.predicate = ANY(%(predicates)s)")
        params["predicates"] = sealed_relations.phrase_keys(user_id, predicates)
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(
        sql.SQL(
            """
        SELECT r.id, r.subject, r.predicate, r.object, r.memory_id, m.text AS source_text,
               m.text_sealed, r.subject_sealed, r.predicate_sealed, r.object_sealed
        FROM memory_relations r JOIN memories m ON m.id = r.memory_id
        WHERE r.user_id = %(user_id)s AND m.user_id = %(user_id)s AND {source_active}
          {only_predicates}
          AND (lower(r.subject) = ANY(%(keys)s) OR lower(r.object) = ANY(%(keys)s))
        ORDER BY r.id
        LIMIT %(limit)s
        """
        ).format(source_active=sql.SQL(M_ACTIVE), only_predicates=only_predicates),
        params,
    )
    edges = []
    for d in await cur.fetchall():
        sealed = d.pop("text_sealed")
        d["source_text"] = sealed_rows.open_text(user_id, d["memory_id"], d["source_text"], sealed)
        d["subject"], d["predicate"], d["object"] = sealed_relations.opened(
            user_id,
            d["id"],
            (d["subject"], d["predicate"], d["object"]),
            (d.pop("subject_sealed"), d.pop("predicate_sealed"), d.pop("object_sealed")),
        )
        edges.append(EdgeRow(**d))
    return edges
