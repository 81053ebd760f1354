"""Recall's second hop: the memories stored next to its best matches (issue 17).

A question's evidence is often spread over memories that do not each look like
the question: in a conversation the answer is the turn after the question, and
an assistant saves related facts in the same chat. After the first ranking, the
memories stored just before and after the top :data:`HOP_SEEDS` matches in their
session (``session_id``; :mod:`storage.recall_neighbours`) are scored by cosine
and the best :data:`HOP_ADDS` of them go in after the first :data:`HOP_KEEP`
matches: they never displace the first ranking's best, and they take the places
its weakest matches held.

Measured on LoCoMo's development conversations before it was built (replaying
recall's own rankings; BENCHMARKS.md, "the session hop"): recall@10 0.702 ->
0.763; the settings below were the plainest of the many that did about as well.
Memories without a session are never hopped to, and a recall with a limit of at
most :data:`HOP_KEEP` has no room for them (the hop is skipped).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg import AsyncConnection

from storage import recall_neighbours as store
from storage.rows import MemoryRow, ScoredMemoryRow

#: Matches whose session neighbours are read.
HOP_SEEDS = 3
#: Memories read on each side of a seed in its session.
HOP_WINDOW = 2
#: Neighbours added at most.
HOP_ADDS = 3
#: Matches of the first ranking a neighbour never displaces.
HOP_KEEP = 7
#: Neighbours below this cosine to the question are not added (an unrelated turn).
HOP_MIN_COSINE = 0.2


@dataclass(frozen=True)
class Hopped:
    """The ids to return, in order, and the rows the hop brought (id -> its seed)."""

    order: list[int]
    rows: dict[int, ScoredMemoryRow] = field(default_factory=dict)
    seed_of: dict[int, int] = field(default_factory=dict)


async def session_hop(
    conn: AsyncConnection,
    user_id: int,
    order: Sequence[int],
    query_embedding: Any,
    *,
    session_of: Mapping[int, str | None],
    limit: int,
    min_score: float | None,
    tags: Sequence[str],
    visible: Callable[[MemoryRow], bool],
) -> Hopped:
    """``order`` (the first ranking, at most ``limit`` ids) with the seeds' neighbours merged in.

    ``session_of``: each match's ``session_id`` (seeds without one are skipped, and
    with none the statement is not sent). ``visible``: whether a memory may be
    recalled for this question (its event time against the question's, as the
    first ranking's candidates were judged).
    """
    seeds = [i for i in order[:HOP_SEEDS] if session_of.get(i)]
    if limit <= HOP_KEEP or not seeds:
        return Hopped(list(order))
    neighbours = await store.session_neighbours(
        conn, user_id, seeds, query_embedding, window=HOP_WINDOW, tags=tags
    )
    floor = max(HOP_MIN_COSINE, min_score or 0.0)
    kept = set(order[:HOP_KEEP])
    picked = sorted(
        (
            n
            for n in neighbours
            if n.scored.row.id not in kept and n.scored.cosine >= floor and visible(n.scored.row)
        ),
        key=lambda n: (-n.scored.cosine, n.scored.row.id),
    )[:HOP_ADDS]
    return Hopped(
        merge(order, [n.scored.row.id for n in picked], limit=limit),
        {n.scored.row.id: n.scored for n in picked},
        {n.scored.row.id: n.seed for n in picked},
    )


def merge(order: Sequence[int], added: Sequence[int], *, limit: int) -> list[int]:
    """The first ``HOP_KEEP`` of ``order``, then ``added``, then the rest, ``limit`` in all."""
    moved = set(added)
    rest = [i for i in order if i not in moved]
    return [*rest[:HOP_KEEP], *added, *rest[HOP_KEEP:]][:limit]
