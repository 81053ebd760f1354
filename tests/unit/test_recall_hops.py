"""Where the hops' memories go in a recall's order, and which linked ones the graph hop reads."""

from __future__ import annotations

from memory.recall.hops import GRAPH_PER_SEED, HOP_KEEP, _most_relevant, merge
from memory.rules import ranking
from memory.rules.ranking import QueryTerm
from storage.recall_neighbours import Linked


def test_added_memories_follow_the_first_ranking_best_and_keep_the_limit() -> None:
    order = list(range(1, 11))
    assert merge(order, [50, 51], limit=10) == [*range(1, HOP_KEEP + 1), 50, 51, HOP_KEEP + 1]


def test_a_match_the_hop_moves_up_appears_once() -> None:
    order = list(range(1, 11))
    assert merge(order, [10], limit=10) == [*range(1, HOP_KEEP + 1), 10, 8, 9]


def test_nothing_added_keeps_the_order() -> None:
    assert merge([3, 1, 2], [], limit=3) == [3, 1, 2]


def _linked(id_: int, place: int, cosine: float, matched: float = 0.0) -> Linked:
    return Linked(id_, seed=100 + place, place=place, cosine=cosine, matched=matched)


def test_the_graph_hop_keeps_each_seeds_most_relevant_by_the_fused_score() -> None:
    terms = [QueryTerm("work", 3, 2.0), QueryTerm("sister", 5, 2.0)]
    # Seed 2's links listed first: the first seed's still come first.
    linked = [
        _linked(20, 2, 0.9),
        *(_linked(10 + i, 1, 0.5) for i in range(GRAPH_PER_SEED + 1)),
        # Nearer by cosine, but "works at" holds half the question's words:
        # 0.45 + 0.8 * 0.5 beats 0.6.
        _linked(1, 1, 0.6),
        _linked(2, 1, 0.45, matched=2.0),
    ]
    picked = _most_relevant(linked, terms)
    assert [n.id for n in picked] == [2, 1, 14, 13, 20]
    assert ranking.fused_score(0.45, 0.5) > 0.6


def test_the_graph_hop_breaks_ties_newest_first() -> None:
    picked = _most_relevant([_linked(5, 1, 0.5), _linked(9, 1, 0.5), _linked(7, 1, 0.5)], [])
    assert [n.id for n in picked] == [9, 7, 5]


def test_the_graph_hop_scales_a_long_texts_lexical_share_as_the_main_path_does() -> None:
    # Issue 33 (finding 8): a long answer holds the question's words by its length; the
    # main path scales its share down, and the graph hop now ranks it the same way.
    terms = [QueryTerm("work", 3, 2.0), QueryTerm("sister", 5, 2.0)]
    long_answer = Linked(1, seed=101, place=1, cosine=0.45, matched=2.0, length=4000)
    short_fact = Linked(2, seed=101, place=1, cosine=0.6, matched=0.0, length=80)
    picked = _most_relevant([long_answer, short_fact], terms)
    assert [n.id for n in picked] == [2, 1]
