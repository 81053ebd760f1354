"""Restored rows written sealed (``ownsona import`` into a sealed store, docs/at-rest.md).

A restored memory and its edges are sealed exactly as a tool's write seals a new
row (``storage.sealed_rows``, ``storage.sealed_relations``), bound to their final
ids: text, tags, metadata and forget reason sealed; tags, normalized text, lexemes
and phrases as the user's keyed hashes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from psycopg import AsyncConnection

from storage.sealing.user_keys import TEXT, UserKeys

from . import sealed_relations
from .rows import MemoryRow
from .sealed_rows import TEXT_SEARCH_CONFIG, seal_metadata


@dataclass(frozen=True)
class SealedRestore:
    """A restored row's sealed columns (docs/at-rest.md; as ``storage.sealed_rows`` writes them)."""

    text_sealed: bytes
    tags_sealed: bytes
    #: Keyed hashes of the text's lexemes: the row's ``sealed_search``.
    sealed_terms: list[str]
    text_chars: int
    #: The row's metadata as JSON and its forget reason (migration 0024; the plain
    #: columns then '{}' and NULL), as ``storage.sealing_move`` seals them.
    metadata_sealed: bytes
    forget_reason_sealed: bytes | None


async def lexemes(conn: AsyncConnection, texts: Sequence[str]) -> list[list[str]]:
    """``to_tsvector``'s lexemes of each text, in order (one round trip)."""
    cur = await conn.execute(
        "SELECT tsvector_to_array(to_tsvector(%s::regconfig, u.t))"
        " FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, i) ORDER BY u.i",
        (TEXT_SEARCH_CONFIG, list(texts)),
    )
    return [list(r[0]) for r in await cur.fetchall()]


def seal_row(
    keys: UserKeys, row: MemoryRow, normalized_text: str, row_lexemes: Sequence[str]
) -> tuple[MemoryRow, str, SealedRestore]:
    """The row as stored sealed, its keyed normalized text, and its sealed columns."""
    sealed = SealedRestore(
        text_sealed=keys.seal(row.text, row.id, "text"),
        tags_sealed=keys.seal(json.dumps(list(row.tags)), row.id, "tags"),
        sealed_terms=sorted(set(keys.keyed_terms(row_lexemes))),
        text_chars=len(row.text),
        metadata_sealed=seal_metadata(keys, row.id, row.metadata),
        forget_reason_sealed=(
            None
            if row.forget_reason is None
            else keys.seal(row.forget_reason, row.id, "forget_reason")
        ),
    )
    stored = replace(row, text="", tags=keys.keyed_tags(row.tags), metadata={}, forget_reason=None)
    return stored, keys.keyed(TEXT, normalized_text), sealed


async def insert_relations(
    conn: AsyncConnection,
    keys: UserKeys,
    memory_ids: Sequence[int],
    triples: Sequence[tuple[str, str, str]],
    created_at: Sequence[datetime],
) -> None:
    """One user's restored edges, sealed as a new edge's are (ids drawn first)."""
    edges = await sealed_relations.seal_new(conn, keys, triples)
    await conn.execute(
        "INSERT INTO memory_relations (id, user_id, memory_id, subject, predicate, object,"
        " subject_sealed, predicate_sealed, object_sealed, predicate_prefixes, created_at)"
        " SELECT u.id, %s, u.memory_id, u.subject, u.predicate, u.object, u.subject_sealed,"
        " u.predicate_sealed, u.object_sealed,"
        " coalesce(string_to_array(nullif(u.prefixes, ''), ' '), '{}'), u.created_at"
        " FROM unnest(%s::bigint[], %s::bigint[], %s::text[], %s::text[], %s::text[],"
        " %s::bytea[], %s::bytea[], %s::bytea[], %s::text[], %s::timestamptz[])"
        " AS u(id, memory_id, subject, predicate, object, subject_sealed, predicate_sealed,"
        " object_sealed, prefixes, created_at)",
        (
            keys.user_id,
            [e.id for e in edges],
            list(memory_ids),
            [e.subject for e in edges],
            [e.predicate for e in edges],
            [e.object for e in edges],
            [e.subject_sealed for e in edges],
            [e.predicate_sealed for e in edges],
            [e.object_sealed for e in edges],
            # Keyed hashes are hex (no space): one space-joined string per edge.
            [" ".join(e.predicate_prefixes) for e in edges],
            list(created_at),
        ),
    )
