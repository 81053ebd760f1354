"""Where the session hop's memories go in a recall's order."""

from __future__ import annotations

from memory.recall_hops import HOP_KEEP, merge


def test_added_memories_follow_the_first_ranking_best_and_keep_the_limit() -> None:
    order = list(range(1, 11))
    assert merge(order, [50, 51], limit=10) == [*range(1, HOP_KEEP + 1), 50, 51, HOP_KEEP + 1]


def test_a_match_the_hop_moves_up_appears_once() -> None:
    order = list(range(1, 11))
    assert merge(order, [10], limit=10) == [*range(1, HOP_KEEP + 1), 10, 8, 9]


def test_nothing_added_keeps_the_order() -> None:
    assert merge([3, 1, 2], [], limit=3) == [3, 1, 2]
