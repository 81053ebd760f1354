"""The lexical side of recall: a text's weighted terms and the rows that hold most of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg import AsyncConnection

from memory.rules import ranking
from storage import memories as store


@dataclass(frozen=True)
class LexicalSide:
    """A text's weighted terms, the rows scoring highest on them, and the user's size."""

    terms: list[ranking.QueryTerm]
    ids: list[int]
    #: The user is searched exactly (``storage.memories.QueryTermStats.exact``), read
    #: with the terms: the vector search that follows needs it too.
    exact: bool


async def lexical_side(
    conn: AsyncConnection, user_id: int, text: str, *, candidates: int, tags: Sequence[str] = ()
) -> LexicalSide:
    """``text``'s weighted terms and the ids of the ``candidates`` rows scoring highest on them."""
    counted = await store.query_term_stats(conn, user_id, text)
    terms = ranking.weigh_terms(counted.terms, counted.total)
    ids = await store.lexical_candidates(
        conn,
        user_id,
        terms=[(t.term, t.weight) for t in terms],
        probe=ranking.probe_terms(terms),
        candidates=candidates,
        exact=counted.exact,
        tags=tags,
    )
    return LexicalSide(terms, ids, counted.exact)
