"""All SQL over ``memories`` (and the write receipts that guard it).

Every function takes a connection: the caller owns the transaction. Every
query is scoped by ``user_id`` (SUPPLEMENT §1).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.adapt import PyFormat
from psycopg.rows import class_row, dict_row
from psycopg.types.json import Jsonb

from .rows import (
    MemoryFilter,
    MemoryRow,
    Neighbour,
    NewMemory,
    ProviderCount,
    ScoredMemoryRow,
    StoreStats,
    TagCount,
)

_COLUMNS = (
    "id, user_id, text, tags, importance, keep, source_provider, capture_mode, session_id,"
    " metadata, embedding_provider, embedding_model, created_at, updated_at,"
    " last_confirmed_at, expires_at, deleted_at, forget_reason, replaced_by_id,"
    " salience, use_count, context_count"
)
_M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in _COLUMNS.split(","))

#: A row recall, listing and counting may show: not forgotten, not expired.
ACTIVE = "deleted_at IS NULL AND (expires_at IS NULL OR expires_at > now())"
#: HNSW search breadth for write-time near-duplicate probes (k <= 5).
_WRITE_EF_SEARCH = 40
_M_ACTIVE = "m.deleted_at IS NULL AND (m.expires_at IS NULL OR m.expires_at > now())"


def _row_from_dict(d: dict[str, Any]) -> MemoryRow:
    return MemoryRow(**{k: d[k] for k in MemoryRow.__dataclass_fields__})


# --- reads -----------------------------------------------------------------


async def get_memory(conn: AsyncConnection, user_id: int, memory_id: int) -> MemoryRow | None:
    """One row of the user's, soft-deleted or not."""
    cur = conn.cursor(row_factory=class_row(MemoryRow))
    await cur.execute(
        f"SELECT {_COLUMNS} FROM memories WHERE id = %s AND user_id = %s", (memory_id, user_id)
    )
    return await cur.fetchone()


async def get_memories_for_update(
    conn: AsyncConnection, user_id: int, memory_ids: Sequence[int]
) -> dict[int, MemoryRow]:
    """The user's rows among ``memory_ids``, locked for this transaction."""
    if not memory_ids:
        return {}
    cur = conn.cursor(row_factory=class_row(MemoryRow))
    await cur.execute(
        f"SELECT {_COLUMNS} FROM memories WHERE user_id = %s AND id = ANY(%s)"
        " ORDER BY id FOR UPDATE",
        (user_id, list(memory_ids)),
    )
    return {row.id: row for row in await cur.fetchall()}


async def search_by_vector(
    conn: AsyncConnection,
    user_id: int,
    query_embedding: Any,
    *,
    candidates: int,
    tags: Sequence[str] = (),
) -> list[ScoredMemoryRow]:
    """The ``candidates`` active rows nearest to the query (HNSW, filters in SQL)."""
    tag_filter = "AND m.tags && %(tags)s" if tags else ""
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(
        f"""
        SELECT {_M_COLUMNS},
               1 - (m.embedding <=> %(q)b) AS cosine,
               CASE WHEN m.context_centroid IS NULL THEN 0
                    ELSE greatest(0, 1 - (m.context_centroid <=> %(q)b)) END AS context_match
        FROM memories m
        WHERE m.user_id = %(user_id)s AND {_M_ACTIVE} {tag_filter}
        ORDER BY m.embedding <=> %(q)b
        LIMIT %(k)s
        """,
        {"q": query_embedding, "user_id": user_id, "tags": list(tags), "k": candidates},
    )
    return [
        ScoredMemoryRow(_row_from_dict(d), float(d["cosine"]), float(d["context_match"]))
        for d in await cur.fetchall()
    ]


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


@dataclass(frozen=True)
class HybridCandidate:
    """A candidate row of hybrid recall with both of its similarity signals."""

    scored: ScoredMemoryRow
    #: Sum of the weights of the query terms the row contains (0 when none).
    lexical: float


async def query_term_stats(conn: AsyncConnection, user_id: int, query: str) -> QueryTermStats:
    """The query's search terms and their row counts in the user's store (migration 0002)."""
    cur = await conn.execute(
        """
        SELECT coalesce((SELECT docs FROM memory_term_totals WHERE user_id = %(user_id)s), 0),
               coalesce(array_agg(q.term ORDER BY q.term), '{}'),
               coalesce(array_agg(coalesce(s.docs, 0) ORDER BY q.term), '{}')
        FROM unnest(tsvector_to_array(to_tsvector(%(config)s::regconfig, %(query)s))) AS q(term)
        LEFT JOIN memory_terms s ON s.user_id = %(user_id)s AND s.term = q.term
        """,
        {"user_id": user_id, "config": TEXT_SEARCH_CONFIG, "query": query},
    )
    row = await cur.fetchone()
    assert row is not None
    return QueryTermStats(int(row[0]), tuple(zip(row[1], (int(d) for d in row[2]))))


def _tsquery_term(term: str) -> str:
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
            sql.SQL("CASE WHEN m.text_search @@ {}::tsquery THEN {}::float8 ELSE 0 END").format(
                sql.Placeholder(f"tq{i}"), sql.Placeholder(f"tw{i}")
            )
        )
        params[f"tq{i}"] = _tsquery_term(term)
        params[f"tw{i}"] = float(weight)
    return sql.SQL("({})").format(sql.SQL(" + ").join(parts)), params


async def lexical_candidates(
    conn: AsyncConnection,
    user_id: int,
    *,
    terms: Sequence[tuple[str, float]],
    probe: Sequence[str],
    candidates: int,
    tags: Sequence[str] = (),
) -> list[int]:
    """Ids of the ``candidates`` active rows scoring highest on the weighted ``terms``.

    Only rows containing at least one ``probe`` term are read (GIN index); the
    user, deletion, expiry and tag filters apply in SQL, as on the vector side.
    A row's score is the sum of the weights of the ``terms`` it contains.
    """
    if not terms or not probe or candidates <= 0:
        return []
    score, params = _lexical_score(terms)
    tag_filter = "AND m.tags && %(tags)s" if tags else ""
    query = sql.SQL(
        "SELECT m.id FROM memories m"
        f" WHERE m.user_id = %(user_id)s AND {_M_ACTIVE} {tag_filter}"
        " AND m.text_search @@ %(probe)s::tsquery"
        " ORDER BY {score} DESC, m.id DESC LIMIT %(k)s"
    ).format(score=score)
    cur = await conn.execute(
        query,
        {
            **params,
            "user_id": user_id,
            "tags": list(tags),
            "probe": " | ".join(_tsquery_term(t) for t in probe),
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
    terms: Sequence[tuple[str, float]] = (),
    lexical_ids: Sequence[int] = (),
    tags: Sequence[str] = (),
) -> list[HybridCandidate]:
    """The vector candidates of a query and ``lexical_ids``, with cosine and lexical score.

    The ``candidates`` active rows nearest to the query (HNSW), joined by the
    rows of ``lexical_ids`` (from :func:`lexical_candidates`) that still pass
    the same filters: the user, not deleted, not expired, the tags. A row's
    lexical score is the sum of the weights of the ``terms`` it contains,
    whichever side it came from.
    """
    score, params = _lexical_score(terms)
    tag_filter = "AND m.tags && %(tags)s" if tags else ""
    lexical_side = (
        f"""
            UNION
            SELECT m.id FROM memories m
            WHERE m.id = ANY(%(lexical_ids)s) AND m.user_id = %(user_id)s AND {_M_ACTIVE} {tag_filter}
        """
        if lexical_ids
        else ""
    )
    query = sql.SQL(
        f"""
        WITH picked AS (
            (SELECT m.id FROM memories m
             WHERE m.user_id = %(user_id)s AND {_M_ACTIVE} {tag_filter}
             ORDER BY m.embedding <=> %(q)b
             LIMIT %(k)s)
            {lexical_side}
        )
        SELECT {_M_COLUMNS},
               1 - (m.embedding <=> %(q)b) AS cosine,
               CASE WHEN m.context_centroid IS NULL THEN 0
                    ELSE greatest(0, 1 - (m.context_centroid <=> %(q)b)) END AS context_match,
               {{score}} AS lexical
        FROM picked JOIN memories m ON m.id = picked.id
        """
    ).format(score=score)
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(
        query,
        {
            **params,
            "q": query_embedding,
            "user_id": user_id,
            "tags": list(tags),
            "k": candidates,
            "lexical_ids": list(lexical_ids),
        },
    )
    return [
        HybridCandidate(
            ScoredMemoryRow(_row_from_dict(d), float(d["cosine"]), float(d["context_match"])),
            float(d["lexical"]),
        )
        for d in await cur.fetchall()
    ]


def _filter_clause(f: MemoryFilter) -> tuple[str, dict[str, Any]]:
    clauses = [] if f.include_deleted else [ACTIVE]
    params: dict[str, Any] = {}
    if f.untagged_only:
        clauses.append("cardinality(tags) = 0")
    if f.min_chars is not None:
        clauses.append("char_length(text) >= %(min_chars)s")
        params["min_chars"] = f.min_chars
    if f.max_chars is not None:
        clauses.append("char_length(text) <= %(max_chars)s")
        params["max_chars"] = f.max_chars
    if f.not_confirmed_since is not None:
        clauses.append("(last_confirmed_at IS NULL OR last_confirmed_at < %(ncs)s)")
        params["ncs"] = f.not_confirmed_since
    if f.tags:
        clauses.append("tags && %(tags)s")
        params["tags"] = list(f.tags)
    if f.source_provider is not None:
        clauses.append("source_provider = %(source_provider)s")
        params["source_provider"] = f.source_provider
    return (" AND " + " AND ".join(clauses)) if clauses else "", params


async def list_memories(
    conn: AsyncConnection, user_id: int, f: MemoryFilter, *, limit: int, offset: int
) -> list[MemoryRow]:
    where, params = _filter_clause(f)
    cur = conn.cursor(row_factory=class_row(MemoryRow))
    await cur.execute(
        f"SELECT {_COLUMNS} FROM memories WHERE user_id = %(user_id)s {where}"
        " ORDER BY created_at DESC, id DESC LIMIT %(limit)s OFFSET %(offset)s",
        {**params, "user_id": user_id, "limit": limit, "offset": offset},
    )
    return await cur.fetchall()


async def count_memories(conn: AsyncConnection, user_id: int, f: MemoryFilter) -> int:
    where, params = _filter_clause(f)
    cur = await conn.execute(
        f"SELECT count(*) FROM memories WHERE user_id = %(user_id)s {where}",
        {**params, "user_id": user_id},
    )
    row = await cur.fetchone()
    return int(row[0]) if row else 0


def _like_pattern(fragment: str) -> str:
    escaped = fragment.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


async def text_search(
    conn: AsyncConnection, user_id: int, fragment: str, *, limit: int
) -> list[MemoryRow]:
    """Active rows containing ``fragment``, case-insensitively (trigram-indexed)."""
    cur = conn.cursor(row_factory=class_row(MemoryRow))
    await cur.execute(
        f"SELECT {_COLUMNS} FROM memories WHERE user_id = %s AND {ACTIVE}"
        " AND text ILIKE %s ORDER BY created_at DESC, id DESC LIMIT %s",
        (user_id, _like_pattern(fragment), limit),
    )
    return await cur.fetchall()


async def export_rows(
    conn: AsyncConnection, user_id: int, *, include_deleted: bool, limit: int
) -> list[MemoryRow]:
    where = "" if include_deleted else f"AND {ACTIVE}"
    cur = conn.cursor(row_factory=class_row(MemoryRow))
    await cur.execute(
        f"SELECT {_COLUMNS} FROM memories WHERE user_id = %s {where}"
        " ORDER BY created_at, id LIMIT %s",
        (user_id, limit),
    )
    return await cur.fetchall()


async def store_stats(conn: AsyncConnection, user_id: int) -> StoreStats:
    cur = conn.cursor(row_factory=class_row(StoreStats))
    await cur.execute(
        f"""
        SELECT count(*) AS total,
               count(*) FILTER (WHERE {ACTIVE}) AS active,
               count(*) FILTER (WHERE deleted_at IS NOT NULL) AS soft_deleted,
               count(*) FILTER (WHERE deleted_at IS NULL AND expires_at <= now()) AS expired,
               avg(importance) FILTER (WHERE {ACTIVE}) AS avg_importance,
               min(created_at) AS oldest_created_at,
               max(created_at) AS newest_created_at
        FROM memories WHERE user_id = %s
        """,
        (user_id,),
    )
    stats = await cur.fetchone()
    assert stats is not None
    return stats


async def tag_counts(
    conn: AsyncConnection, user_id: int, *, include_deleted: bool, limit: int
) -> list[TagCount]:
    where = "" if include_deleted else f"AND {ACTIVE}"
    cur = conn.cursor(row_factory=class_row(TagCount))
    await cur.execute(
        f"SELECT t.tag, count(*) AS count FROM memories, unnest(tags) AS t(tag)"
        f" WHERE user_id = %s {where} GROUP BY t.tag ORDER BY count DESC, t.tag LIMIT %s",
        (user_id, limit),
    )
    return await cur.fetchall()


async def provider_counts(conn: AsyncConnection, user_id: int) -> list[ProviderCount]:
    cur = conn.cursor(row_factory=class_row(ProviderCount))
    await cur.execute(
        "SELECT coalesce(source_provider, '(none)') AS provider, count(*) AS count"
        " FROM memories WHERE user_id = %s GROUP BY 1 ORDER BY count DESC, provider",
        (user_id,),
    )
    return await cur.fetchall()


# --- write-time lookups ----------------------------------------------------


async def find_exact(
    conn: AsyncConnection, user_id: int, normalized_texts: Sequence[str]
) -> dict[str, MemoryRow]:
    """Undeleted rows (expired included) whose normalized text is one of these."""
    if not normalized_texts:
        return {}
    # One unique-index probe per digest. The planner has no statistics for the
    # md5 expression of a partial index and chose a full scan for "= ANY"
    # (0.14 s for 200 texts against 100k rows); LATERAL ... LIMIT 1 is 2 ms.
    digests = [hashlib.md5(t.encode("utf-8")).hexdigest() for t in normalized_texts]
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(
        f"SELECT {_M_COLUMNS}, m.normalized_text FROM unnest(%s::text[]) AS d(digest)"
        " CROSS JOIN LATERAL (SELECT * FROM memories"
        " WHERE user_id = %s AND deleted_at IS NULL AND md5(normalized_text) = d.digest"
        " LIMIT 1) AS m",
        (digests, user_id),
    )
    wanted = set(normalized_texts)
    return {
        d["normalized_text"]: _row_from_dict(d)
        for d in await cur.fetchall()
        if d["normalized_text"] in wanted  # an md5 collision is not a duplicate
    }


async def nearest_active(
    conn: AsyncConnection, user_id: int, embeddings: Sequence[Any], *, k: int, min_score: float
) -> list[Neighbour]:
    """For each probe vector, its top-``k`` active rows at cosine >= ``min_score``.

    Must run inside a transaction: it narrows the HNSW search for its duration.
    """
    if not embeddings:
        return []
    # A top-5 check at cosine >= 0.9 needs far less search breadth than
    # recall's candidate lists; this took a 200-item batch's probes from
    # 0.21 s to 0.08 s (measured on a 2k-row store).
    await conn.execute(f"SET LOCAL hnsw.ef_search = {_WRITE_EF_SEARCH}")
    cur = conn.cursor(row_factory=class_row(Neighbour))
    # %(vs)b: the probe vectors go in binary; as text, 200 of them cost ~80 ms to
    # format and parse (measured), binary ~1 ms.
    await cur.execute(
        f"""
        SELECT (q.i - 1)::int AS probe, n.id, n.text, n.tags, n.score,
               NULL::text AS forget_reason, NULL::bigint AS replaced_by_id,
               NULL::timestamptz AS deleted_at
        FROM unnest(%(vs)b::vector[]) WITH ORDINALITY AS q(v, i)
        CROSS JOIN LATERAL (
            SELECT m.id, m.text, m.tags, 1 - (m.embedding <=> q.v) AS score
            FROM memories m
            WHERE m.user_id = %(user_id)s AND {_M_ACTIVE}
            ORDER BY m.embedding <=> q.v
            LIMIT %(k)s
        ) n
        WHERE n.score >= %(min)s
        ORDER BY q.i, n.score DESC
        """,
        {"vs": list(embeddings), "user_id": user_id, "k": k, "min": min_score},
    )
    return await cur.fetchall()


async def nearest_tombstones(
    conn: AsyncConnection, user_id: int, embeddings: Sequence[Any], *, k: int, min_score: float
) -> list[Neighbour]:
    """For each probe vector, its top-``k`` soft-deleted rows at cosine >= ``min_score``.

    Tombstones are few next to active rows, so this is an exact scan over the
    user's deleted rows, gathered once (MATERIALIZED keeps the planner off the
    HNSW index, which would wade through active rows to find them).
    """
    if not embeddings:
        return []
    cur = conn.cursor(row_factory=class_row(Neighbour))
    await cur.execute(
        """
        WITH dead AS MATERIALIZED (
            SELECT id, text, tags, embedding, forget_reason, replaced_by_id, deleted_at
            FROM memories WHERE user_id = %(user_id)s AND deleted_at IS NOT NULL
        )
        SELECT (q.i - 1)::int AS probe, n.id, n.text, n.tags, n.score,
               n.forget_reason, n.replaced_by_id, n.deleted_at
        FROM unnest(%(vs)b::vector[]) WITH ORDINALITY AS q(v, i)
        CROSS JOIN LATERAL (
            SELECT d.id, d.text, d.tags, 1 - (d.embedding <=> q.v) AS score,
                   d.forget_reason, d.replaced_by_id, d.deleted_at
            FROM dead d
            ORDER BY d.embedding <=> q.v
            LIMIT %(k)s
        ) n
        WHERE n.score >= %(min)s
        ORDER BY q.i, n.score DESC
        """,
        {"vs": list(embeddings), "user_id": user_id, "k": k, "min": min_score},
    )
    return await cur.fetchall()


# --- writes ----------------------------------------------------------------


async def insert_memories(
    conn: AsyncConnection, user_id: int, items: Sequence[NewMemory]
) -> list[tuple[int, datetime]]:
    """Insert rows in order; return (id, created_at) of each, in the same order."""
    if not items:
        return []
    rows = []
    params: list[Any] = []
    for item in items:
        # The vector goes in binary: as text, 384 floats cost ~0.25 ms to format
        # and parse each (a batch of 200: ~50 ms), binary ~1/50th of that.
        rows.append(
            sql.SQL("(%s, %s, %s, %b, %s, %s, %s, %s, %s, %s, %s, %s, coalesce(%s, now()), %s)")
        )
        params.extend(
            [
                user_id,
                item.text,
                item.normalized_text,
                item.embedding,
                item.embedding_provider,
                item.embedding_model,
                item.tags,
                item.importance,
                item.keep,
                item.source_provider,
                item.capture_mode,
                item.session_id,
                item.last_confirmed_at,
                item.expires_at,
            ]
        )
    query = sql.SQL(
        "INSERT INTO memories (user_id, text, normalized_text, embedding, embedding_provider,"
        " embedding_model, tags, importance, keep, source_provider, capture_mode, session_id,"
        " last_confirmed_at, expires_at) VALUES {} RETURNING id, created_at"
    ).format(sql.SQL(", ").join(rows))
    cur = await conn.execute(query, params)
    return [(int(r[0]), r[1]) for r in await cur.fetchall()]


async def soft_delete(
    conn: AsyncConnection,
    user_id: int,
    memory_ids: Sequence[int],
    *,
    reason: str | None,
    replaced_by_id: int | None,
    keep_existing_metadata: bool = False,
) -> None:
    """Mark rows forgotten; on rows already forgotten, rewrite the tombstone metadata.

    With ``keep_existing_metadata`` a None reason or replacement leaves the
    stored value alone instead of clearing it.
    """
    if not memory_ids:
        return
    if keep_existing_metadata:
        await conn.execute(
            "UPDATE memories SET deleted_at = coalesce(deleted_at, now()),"
            " forget_reason = coalesce(%s, forget_reason),"
            " replaced_by_id = coalesce(%s, replaced_by_id), updated_at = now()"
            " WHERE user_id = %s AND id = ANY(%s)",
            (reason, replaced_by_id, user_id, list(memory_ids)),
        )
    else:
        await conn.execute(
            "UPDATE memories SET deleted_at = coalesce(deleted_at, now()), forget_reason = %s,"
            " replaced_by_id = %s, updated_at = now() WHERE user_id = %s AND id = ANY(%s)",
            (reason, replaced_by_id, user_id, list(memory_ids)),
        )


async def hard_delete(conn: AsyncConnection, user_id: int, memory_id: int) -> bool:
    """Remove the row and what derives from it (relations cascade; receipts naming it)."""
    cur = await conn.execute(
        "DELETE FROM memories WHERE user_id = %s AND id = %s", (user_id, memory_id)
    )
    await conn.execute(
        "DELETE FROM write_receipts WHERE user_id = %s"
        " AND jsonb_path_exists(result, '$.** ? (@.id == $m || @.memory_id == $m)',"
        " jsonb_build_object('m', %s::bigint))",
        (user_id, memory_id),
    )
    return cur.rowcount > 0


async def set_salience(
    conn: AsyncConnection,
    user_id: int,
    updates: Sequence[tuple[int, float, int]],
) -> None:
    """Write (id, salience, use_count increment) for each row."""
    if not updates:
        return
    await conn.execute(
        "UPDATE memories m SET salience = u.salience, use_count = m.use_count + u.inc"
        " FROM unnest(%s::bigint[], %s::float8[], %s::int[]) AS u(id, salience, inc)"
        " WHERE m.id = u.id AND m.user_id = %s",
        (
            [u[0] for u in updates],
            [u[1] for u in updates],
            [u[2] for u in updates],
            user_id,
        ),
    )


async def confirm(conn: AsyncConnection, user_id: int, memory_id: int, salience: float) -> datetime:
    cur = await conn.execute(
        "UPDATE memories SET last_confirmed_at = now(), salience = %s, use_count = use_count + 1"
        " WHERE user_id = %s AND id = %s RETURNING last_confirmed_at",
        (salience, user_id, memory_id),
    )
    row = await cur.fetchone()
    assert row is not None
    return row[0]


_UPDATABLE = frozenset(
    {
        "text",
        "normalized_text",
        "embedding",
        "embedding_provider",
        "embedding_model",
        "tags",
        "importance",
        "expires_at",
        "last_confirmed_at",
        "keep",
    }
)


async def update_fields(
    conn: AsyncConnection, user_id: int, memory_id: int, changes: dict[str, Any]
) -> None:
    """Set the given columns (a fixed whitelist) and ``updated_at``."""
    unknown = set(changes) - _UPDATABLE
    if unknown:
        raise ValueError(f"not updatable: {sorted(unknown)}")
    assignments = [
        sql.SQL("{} = {}").format(
            sql.Identifier(name),
            # Vectors travel in binary (see insert_memories).
            sql.Placeholder(name, PyFormat.BINARY if name == "embedding" else PyFormat.AUTO),
        )
        for name in changes
    ]
    assignments.append(sql.SQL("updated_at = now()"))
    query = sql.SQL("UPDATE memories SET {} WHERE user_id = %(user_id)s AND id = %(id)s").format(
        sql.SQL(", ").join(assignments)
    )
    await conn.execute(query, {**changes, "user_id": user_id, "id": memory_id})


# --- write receipts (idempotency) -------------------------------------------


async def get_receipt(conn: AsyncConnection, user_id: int, key: str) -> dict[str, Any] | None:
    cur = await conn.execute(
        "SELECT result FROM write_receipts WHERE user_id = %s AND idempotency_key = %s",
        (user_id, key),
    )
    row = await cur.fetchone()
    return row[0] if row else None


async def lock_receipt_key(conn: AsyncConnection, user_id: int, key: str) -> None:
    """Serialise two concurrent runs of the same write until this transaction ends."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, %s))", (key, user_id))


async def put_receipt(
    conn: AsyncConnection, user_id: int, key: str, tool: str, result: dict[str, Any]
) -> None:
    await conn.execute(
        "INSERT INTO write_receipts (user_id, idempotency_key, tool, result)"
        " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
        (user_id, key, tool, Jsonb(result)),
    )


async def prune_receipts(conn: AsyncConnection, *, older_than_s: int) -> None:
    await conn.execute(
        "DELETE FROM write_receipts WHERE created_at < now() - make_interval(secs => %s)",
        (older_than_s,),
    )
