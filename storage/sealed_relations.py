"""Sealed relation phrases (migration 0024, docs/at-rest.md): what an edge stores, and
what a lookup compares with it.

A sealed edge (``subject_sealed`` not NULL) keeps its subject, predicate and object
as AES-GCM values under its user's data key (associated data: user, the edge's own
id, ``relation subject`` / ``relation predicate`` / ``relation object``), and in the
plain columns the keyed hashes of the lowercase phrases, in lowercase hex: every SQL
comparison, ``lower(subject) = …``, the ``lower(subject)`` and ``lower(object)``
indexes, the graph hop's joins on one entity, works on them unchanged, and a keyed
hash is one-to-one within a user, so what matches is what matched plain.
``predicate_prefixes`` holds the keyed hashes of the lowercase predicate's prefixes
that end at a space, for the ``LIKE 'favorite %'`` of the functional patterns.
A plain edge reads as before; a lookup sends both the phrases and their hashes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg import AsyncConnection, sql

from storage.sealing.scope import keys_for
from storage.sealing.user_keys import UserKeys

from .sealed_rows import keys_of

#: The associated data's column of each phrase (not "subject": a relation's own names).
PHRASE_COLUMNS = ("relation subject", "relation predicate", "relation object")


@dataclass(frozen=True)
class SealedEdge:
    """One new edge's columns, sealed: its id (drawn first), keyed and sealed phrases."""

    id: int
    subject: str
    predicate: str
    object: str
    subject_sealed: bytes
    predicate_sealed: bytes
    object_sealed: bytes
    predicate_prefixes: list[str]


def _prefixes(predicate: str) -> list[str]:
    """The lowercase predicate's prefixes ending at a space (``favorite color`` ->
    ``favorite ``): what ``LIKE 'favorite %'`` matches."""
    lower = predicate.lower()
    return [lower[: i + 1] for i, c in enumerate(lower) if c == " "]


async def seal_new(
    conn: AsyncConnection, keys: UserKeys, edges: Sequence[tuple[str, str, str]]
) -> list[SealedEdge]:
    """Draw the edges' ids (one round trip) and seal each phrase bound to its edge."""
    cur = await conn.execute(
        "SELECT ownsona_next_id('memory_relations_id_seq'::regclass) FROM generate_series(1, %s)",
        (len(edges),),
    )
    ids = [int(r[0]) for r in await cur.fetchall()]
    return [seal_edge(keys, edge_id, edge) for edge_id, edge in zip(ids, edges, strict=True)]


def seal_edge(keys: UserKeys, edge_id: int, edge: tuple[str, str, str]) -> SealedEdge:
    subject, predicate, obj = edge
    sealed = [keys.seal(v, edge_id, c) for v, c in zip(edge, PHRASE_COLUMNS, strict=True)]
    return SealedEdge(
        id=edge_id,
        subject=keys.keyed_phrase(subject.lower()),
        predicate=keys.keyed_phrase(predicate.lower()),
        object=keys.keyed_phrase(obj.lower()),
        subject_sealed=sealed[0],
        predicate_sealed=sealed[1],
        object_sealed=sealed[2],
        predicate_prefixes=[keys.keyed_phrase(p) for p in _prefixes(predicate)],
    )


def opened(
    user_id: int,
    edge_id: int,
    plain: tuple[str, str, str],
    sealed: tuple[bytes | None, bytes | None, bytes | None],
) -> tuple[str, str, str]:
    """The edge's (subject, predicate, object): ``plain`` for a plain edge, else opened."""
    if sealed[0] is None:
        return plain
    keys = keys_of(user_id)
    s, p, o = (
        keys.open(bytes(v), edge_id, c)
        for v, c in zip(sealed, PHRASE_COLUMNS, strict=True)
        if v is not None
    )
    return s, p, o


def phrase_keys(user_id: int, phrases: Sequence[str], *, fixed: bool = False) -> list[str]:
    """What a lookup of lowercase ``phrases`` compares with ``lower(column)``: the phrases
    (plain edges) and, with the user's keys in scope, their keyed hashes (sealed ones).

    ``fixed``: the phrases are the code's own, not a user's (their hashes are remembered
    with the keys, :meth:`~storage.sealing.user_keys.UserKeys.keyed_fixed_phrases`)."""
    keys = keys_for(user_id) if phrases else None
    if keys is None:
        return list(phrases)
    lowered = tuple(p.lower() for p in phrases)
    if fixed:
        return [*phrases, *keys.keyed_fixed_phrases(lowered)]
    return [*phrases, *(keys.keyed_phrase(p) for p in lowered)]


@dataclass(frozen=True)
class PredicatePatterns:
    """Predicate LIKE patterns (a trailing ``%`` only) as a sealed edge is matched:
    ``exact`` against ``predicate``, ``prefixes`` against ``predicate_prefixes``."""

    exact: list[str]
    prefixes: list[str]


def predicate_patterns(user_id: int, patterns: Sequence[str]) -> PredicatePatterns:
    """The keyed side of ``patterns`` (empty with no keys in scope: no sealed edge to match).

    A prefix pattern must end with a space before its ``%`` (``favorite %``): a keyed
    hash matches whole words only (ValueError otherwise, rather than miss edges)."""
    keys = keys_for(user_id) if patterns else None
    if keys is None:
        return PredicatePatterns([], [])
    exact, prefixes = [], []
    for pattern in patterns:
        if not pattern.endswith("%"):
            exact.append(pattern.lower())
        elif pattern.endswith(" %"):
            prefixes.append(pattern[:-1].lower())
        else:
            raise ValueError(f"predicate pattern {pattern!r}: a prefix must end at a space")
    # The patterns are the code's (graph.FUNCTIONAL_PATTERNS): the same each recall.
    keyed = keys.keyed_fixed_phrases((*exact, *prefixes))
    return PredicatePatterns(list(keyed[: len(exact)]), list(keyed[len(exact) :]))


#: Edges ``r`` whose predicate matches the patterns: plain edges by LIKE (``%(patterns)s``,
#: escaped), sealed ones by their keyed hashes (``%(sealed_exact)s``, ``%(sealed_prefixes)s``,
#: from :func:`predicate_patterns`).
PREDICATE_MATCHES = sql.SQL(
    "(lower(r.predicate) LIKE ANY(%(patterns)s) OR r.predicate = ANY(%(sealed_exact)s)"
    " OR r.predicate_prefixes && %(sealed_prefixes)s::text[])"
)
