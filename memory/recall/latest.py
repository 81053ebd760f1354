"""Recall's latest-truth-first step: which candidates disagree, then the freshest first.

Three signs that two recalled memories are about one thing and say different
things (issue 17, "latest truth first"):

- their relations give one functional slot different values (the same rules
  ``find_conflicts`` uses, :mod:`memory.graph.conflicts`: "I live in Lisbon" /
  "I moved to Berlin");
- a newer memory named the other in ``downweights``;
- they are near each other (cosine at least ``NEAR_COSINE``) and state
  different values (:func:`memory.rules.latest.values_differ`: "two kids" /
  "three kids").

The ordering itself is :func:`memory.rules.latest.latest_first`; this module
reads what it needs in one query and marks the matches.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from psycopg import AsyncConnection

from memory import graph
from memory.rules import latest
from storage import recall_links as store
from storage.rows import MemoryRow

from .candidates import Candidate

#: Cosine from which two matches with different values count as one fact told twice.
#: "My dentist is Dr. Okafor on Elm Street" / "... Dr. Patel on Main Street" is 0.75
#: under MiniLM, "I have two kids" / "three kids" 0.92; unrelated facts sharing a
#: template ("My sister Ana lives in Porto" / "My brother Rui ...", 0.69) are kept
#: apart by values_differ's shared-words test, not by this bound.
NEAR_COSINE = 0.75
#: Candidates still owed their relation extraction that recall reads with the rules
#: itself, the newest first: a fact stored a moment ago is the one most likely to be
#: owed, and after a large import this bounds the work (about 0.2 ms a short text).
OWED_INLINE = 8
#: Owed texts longer than this are left to the worker: they would hold the event loop.
_INLINE_CHARS = 2000
#: Extractions remembered by text: recall meets the same owed candidates again.
_EXTRACTED_CACHE = 4096


async def latest_first(
    conn: AsyncConnection,
    user_id: int,
    ranked: Sequence[Candidate],
    *,
    limit: int,
    relations: bool,
) -> list[Candidate]:
    """Reorder ``ranked`` (every candidate, relevance order), keep ``limit`` and mark them:
    ``older_than``, ``superseded_by``, ``promoted``.

    ``relations``: whether relation edges are read (off with
    ``RELATION_EXTRACTOR=off``, where there are none).
    """
    shown = [c.key for c in ranked[:limit]]
    if not shown:
        return []
    rows = {c.key: c.row for c in ranked}
    links = await store.recall_links(
        conn,
        user_id,
        shown=shown,
        candidates=list(rows),
        functional_patterns=graph.FUNCTIONAL_PATTERNS if relations else (),
        near_cosine=NEAR_COSINE,
    )
    owed = (
        sorted(
            (rows[i] for i in links.owed if rows[i].chars <= _INLINE_CHARS),
            key=lambda r: r.created_at,
            reverse=True,
        )[:OWED_INLINE]
        if relations
        else []
    )
    pairs = _disagreements(links, owed, rows)
    fresh = {
        r.id: latest.freshness(r.last_confirmed_at, r.updated_at, r.created_at)
        for r in rows.values()
    }
    done = latest.latest_first([c.key for c in ranked], fresh, pairs, limit=limit)
    by_id = {c.key: c for c in ranked}
    superseded: dict[int, list[int]] = {}
    for old, new in links.downweighted_by:
        superseded.setdefault(old, []).append(new)
    out = [by_id[key] for key in done.order]
    for c in out:
        c.older_than = done.older_than.get(c.key, [])
        c.superseded_by = sorted(superseded.get(c.key, []))
        c.promoted = c.key in done.promoted
    return out


@lru_cache(maxsize=_EXTRACTED_CACHE)
def _extract(text: str) -> tuple[graph.Relation, ...]:
    return tuple(graph.extract(text))


def _disagreements(
    links: store.RecallLinks, owed: list[MemoryRow], rows: dict[int, MemoryRow]
) -> list[tuple[int, int]]:
    facts = [(m, graph.Relation(s, p, o)) for m, s, p, o in links.edges]
    for row in owed:
        facts += [(row.id, r) for r in _extract(row.text)]
    pairs = [(c.first, c.second) for c in graph.conflicts(facts)]
    pairs += [(old, new) for old, new in links.downweighted_by if new in rows]
    pairs += [(a, b) for a, b in links.near if latest.values_differ(rows[a].text, rows[b].text)]
    return pairs
