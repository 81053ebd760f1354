"""Recall's second hop: memories stored next to its best matches, or linked to them (issue 17).

A question's evidence is often spread over memories that do not each look like
the question. In a conversation the answer is the turn after the question, and
an assistant saves related facts in the same chat: the **session hop** reads the
memories stored just before and after the top :data:`HOP_SEEDS` matches in their
session (``session_id``). "Where does my manager live?" finds "My manager is
Ana Silva." but not "Ana Silva lives in Porto.", which does not name the manager
and looks no more like the question than every other "... lives in ..." fact:
the **graph hop** reads the memories whose extracted relations name a person or
thing the top matches' relations name (not the user, whom nearly every fact
names). Both sets are scored by cosine, and the best :data:`HOP_ADDS` of them go
in after the first :data:`HOP_KEEP` matches: they never displace the first
ranking's best, and they take the places its weakest matches held.

Measured before they were built (BENCHMARKS.md): the session hop replaying
recall's own LoCoMo rankings (recall@10 0.702 -> 0.763); the graph hop on
generated two-step questions (``scripts/bench/graph_hop.py``). Memories without a
session or relations are never hopped to, nor a session neighbour longer than
``lexical_length.LENGTH_REFERENCE`` (an assistant's long answer, issue 28), and
a recall with a limit of at most :data:`HOP_KEEP` has no room for them (nothing
is read).

The graph hop ranks each seed's linked memories by recall's fused score
(:func:`memory.rules.ranking.fused_score`, here, on the cosine and matched term
weight :func:`storage.recall_neighbours.graph_linked` returns) and reads only the
few it keeps whole (:func:`storage.recall_neighbours.graph_rows`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import zip_longest
from typing import Any

from psycopg import AsyncConnection

from memory import graph
from memory.rules import latest, lexical_length, ranking
from storage import recall_neighbours as store
from storage.rows import MemoryRow

from .candidates import Candidate, Hop, from_row

#: Matches whose neighbours are read.
HOP_SEEDS = 3
#: Memories read on each side of a seed in its session.
HOP_WINDOW = 2
#: Entities of the seeds' relations followed at most, the first seed's first.
GRAPH_ENTITIES = 6
#: Newest memories read per entity and side (named as subject, as object): a
#: person in hundreds of memories is followed into their latest, at a bounded cost.
GRAPH_PER_ENTITY = 20
#: Linked memories read per seed, the most relevant first: the first that is visible and
#: not contradicted by a fresher one among them is taken.
GRAPH_PER_SEED = 4
#: Neighbours added at most.
HOP_ADDS = 3
#: Matches of the first ranking a neighbour never displaces.
HOP_KEEP = 7
#: Neighbours below this cosine to the question are not added (an unrelated turn).
HOP_MIN_COSINE = 0.2


async def hop(
    conn: AsyncConnection,
    user_id: int,
    kept: Sequence[Candidate],
    query_embedding: Any,
    *,
    known: Mapping[int, Candidate],
    sessions: bool,
    relations: bool,
    terms: Sequence[ranking.QueryTerm],
    limit: int,
    min_score: float | None,
    tags: Sequence[str],
    visible: Callable[[MemoryRow], bool],
) -> list[Candidate]:
    """``kept`` (the first ranking, at most ``limit``) with the seeds' neighbours merged in,
    each marked with its hop and the match it was reached from.

    ``sessions`` / ``relations``: which hops to take. ``terms``: the query's weighted
    terms, for the graph hop's relevance (recall's fused score). Seeds without a
    ``session_id`` have no session neighbours (with none that statement is not sent).
    ``known``: the recall's candidates by id; a neighbour that is one of them is that
    candidate, marked. ``visible``: whether a memory may be recalled for this question
    (its event time against the question's, as the first ranking's candidates were judged).
    """
    order = [c.key for c in kept]
    seeds = order[:HOP_SEEDS]
    if limit <= HOP_KEEP or not seeds:
        return list(kept)
    floor = max(HOP_MIN_COSINE, min_score or 0.0)
    kept_ids = set(order[:HOP_KEEP])

    def fits(n: store.Neighbour) -> bool:
        return (
            n.scored.row.id not in kept_ids and n.scored.cosine >= floor and visible(n.scored.row)
        )

    near: list[store.Neighbour] = []
    in_sessions = [c.key for c in kept[:HOP_SEEDS] if c.row.session_id] if sessions else []
    if in_sessions:
        found = await store.session_neighbours(
            conn, user_id, in_sessions, query_embedding, window=HOP_WINDOW, tags=tags
        )
        # The reply next to a match, not a document: a neighbour longer than a
        # paragraph (an assistant's long answer) is not hopped to (issue 28).
        near = sorted(
            (n for n in found if fits(n) and n.scored.row.chars <= lexical_length.LENGTH_REFERENCE),
            key=lambda n: (-n.scored.cosine, n.scored.row.id),
        )
    linked: list[store.Neighbour] = []
    if relations:
        # The best linked memory of each seed, the first seed's first: the best
        # match's links come in even when another seed's look more like the
        # question ("Where does my manager live?": the manager's home, not the
        # home of someone a lesser match names).
        scored = await store.graph_linked(
            conn,
            user_id,
            seeds,
            query_embedding,
            skip_entity=graph.key(graph.USER),
            skip_ids=sorted(kept_ids),
            max_entities=GRAPH_ENTITIES,
            per_entity=GRAPH_PER_ENTITY,
            min_cosine=floor,
            terms=[(t.term, t.weight) for t in terms],
            tags=tags,
        )
        found = await store.graph_rows(
            conn, user_id, _most_relevant(scored, terms), query_embedding
        )
        outdated = _outdated(found)
        served: set[int] = set()  # seeds with their pick
        for n in found:
            if n.seed not in served and n.scored.row.id not in outdated and fits(n):
                linked.append(n)
                served.add(n.seed)
    # In turn, the session's best then the graph's best, each memory once.
    picked: dict[int, tuple[store.Neighbour, Hop]] = {}
    turns: list[tuple[store.Neighbour | None, Hop]] = []
    for by_session, by_graph in zip_longest(near, linked):
        turns += [(by_session, "session"), (by_graph, "graph")]
    for neighbour, kind in turns:
        if neighbour is not None and len(picked) < HOP_ADDS:
            picked.setdefault(neighbour.scored.row.id, (neighbour, kind))
    by_id = {c.key: c for c in kept}
    for key, (n, kind) in picked.items():
        c = by_id[key] = known.get(key) or from_row(n.scored)
        c.hop, c.hop_from = kind, n.seed
    return [by_id[key] for key in merge(order, list(picked), limit=limit)]


def _most_relevant(
    linked: Sequence[store.Linked], terms: Sequence[ranking.QueryTerm]
) -> list[store.Linked]:
    """Each seed's :data:`GRAPH_PER_SEED` linked memories of the highest fused score
    (ties: the newest), the first seed's first, each seed's best first."""
    by_seed: dict[int, list[store.Linked]] = {}
    for n in linked:
        by_seed.setdefault(n.place, []).append(n)
    out: list[store.Linked] = []
    for place in sorted(by_seed):
        ranked = sorted(
            by_seed[place],
            key=lambda n: (
                -ranking.fused_score(n.cosine, _scaled_share(n, terms)),
                -n.id,
            ),
        )
        out += ranked[:GRAPH_PER_SEED]
    return out


def _scaled_share(linked: store.Linked, terms: Sequence[ranking.QueryTerm]) -> float:
    """The lexical share scaled by the text's length, as the main path scores it (a long
    text holds the question's words by its length, issue 28; issue 33 finding 8)."""
    factor = lexical_length.length_factor(linked.length) if linked.length else 1.0
    return ranking.lexical_share(linked.matched, terms) * factor


def _outdated(found: Sequence[store.Neighbour]) -> set[int]:
    """The linked memories a newer one downweights, or a fresher one among them
    contradicts ("Ana lives in Porto" / "Ana moved to Lisbon"): the same slot rules
    as the latest-truth step."""
    facts = [(n.scored.row.id, graph.Relation(*edge)) for n in found for edge in n.edges]
    rows = {n.scored.row.id: n.scored.row for n in found}
    out = {n.scored.row.id for n in found if n.downweighted}
    for c in graph.conflicts(facts):
        a, b = rows[c.first], rows[c.second]
        fresher = latest.freshness(a.last_confirmed_at, a.updated_at, a.created_at) > (
            latest.freshness(b.last_confirmed_at, b.updated_at, b.created_at)
        )
        out.add(b.id if fresher else a.id)
    return out


def merge(order: Sequence[int], added: Sequence[int], *, limit: int) -> list[int]:
    """The first ``HOP_KEEP`` of ``order``, then ``added``, then the rest, ``limit`` in all."""
    moved = set(added)
    rest = [i for i in order if i not in moved]
    return [*rest[:HOP_KEEP], *added, *rest[HOP_KEEP:]][:limit]
