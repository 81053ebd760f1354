"""Latest truth first (memory.rules.latest): the ordering and the value test, pure."""

from __future__ import annotations

import pytest

from memory.rules.latest import latest_first, values_differ


def fresh(*order: str) -> dict[str, tuple[float, float, float]]:
    """Freshness keys: later in ``order`` is fresher."""
    return {k: (float(i), 0.0, 0.0) for i, k in enumerate(order)}


def test_no_disagreement_keeps_the_relevance_order() -> None:
    done = latest_first(["a", "b", "c"], fresh("a", "b", "c"), [], limit=2)
    assert done.order == ["a", "b"]
    assert done.older_than == {} and done.promoted == frozenset()


def test_the_fresher_of_two_disagreeing_matches_takes_the_older_ones_place() -> None:
    # Relevance: old, x, new. "new" disagrees with "old" and is fresher.
    done = latest_first(["old", "x", "new"], fresh("old", "x", "new"), [("old", "new")], limit=3)
    assert done.order == ["new", "old", "x"]
    assert done.older_than == {"old": ["new"]}
    assert done.promoted == frozenset({"new"})


def test_a_fresher_match_below_the_limit_is_pulled_up_and_the_last_drops_out() -> None:
    ranked = ["old", "x", "y", "new"]
    done = latest_first(ranked, fresh("old", "x", "y", "new"), [("new", "old")], limit=3)
    assert done.order == ["new", "old", "x"]
    assert "y" not in done.order


def test_groups_entirely_below_the_limit_change_nothing() -> None:
    ranked = ["x", "y", "old", "new"]
    done = latest_first(ranked, fresh("x", "y", "old", "new"), [("old", "new")], limit=2)
    assert done.order == ["x", "y"] and done.older_than == {}


def test_when_the_freshest_already_leads_nothing_moves() -> None:
    done = latest_first(["new", "old"], fresh("old", "new"), [("old", "new")], limit=2)
    assert done.order == ["new", "old"]
    assert done.older_than == {"old": ["new"]} and done.promoted == frozenset()


def test_a_chain_of_three_puts_the_freshest_first_and_marks_direct_disagreements() -> None:
    ranked = ["a", "b", "c"]  # a is most relevant and oldest; c freshest
    done = latest_first(ranked, fresh("a", "b", "c"), [("a", "b"), ("b", "c")], limit=3)
    assert done.order == ["c", "a", "b"]
    assert done.older_than == {"a": ["b"], "b": ["c"]}


def test_pairs_naming_unknown_keys_are_ignored() -> None:
    done = latest_first(["a", "b"], fresh("a", "b"), [("a", "zz"), ("a", "a")], limit=2)
    assert done.order == ["a", "b"] and done.older_than == {}


def test_equal_freshness_keeps_the_better_ranked_first() -> None:
    same = {"a": (1.0, 1.0, 1.0), "b": (1.0, 1.0, 1.0)}
    done = latest_first(["a", "b"], same, [("a", "b")], limit=2)
    assert done.order == ["a", "b"] and done.older_than == {}


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("I have two kids.", "I have three kids."),
        ("I ran 5 km this morning.", "I ran 10 km this morning."),
        ("I usually wake up at 6am.", "I usually wake up at 7:30am."),
        ("We have no pets.", "We have two pets."),
    ],
)
def test_one_fact_with_different_values_differs(a: str, b: str) -> None:
    assert values_differ(a, b) and values_differ(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # The same values, worded differently.
        ("My dentist is Dr. Okafor on Elm Street.", "My dentist is Dr. Okafor, on Elm Street."),
        # One adds detail to the other.
        ("My office is on Elm Street.", "My office is on Elm Street, room 4."),
        # Different facts sharing a template: different people, not different values.
        ("My sister Ana lives in Porto.", "My brother Rui lives in Porto."),
        ("I have a dog named Max.", "I have a cat named Luna."),
        (
            "My friend Maren lives in Oslo and spends every weekend cycling.",
            "My friend Tobias lives in Munich and spends every weekend chess.",
        ),
        ("My friend Maren lives in Oslo.", "My friend Tobias lives in Munich."),
        # Names alone: the relation slots catch a changed employer, not this test.
        ("My dentist is Dr. Okafor on Elm Street.", "My dentist is Dr. Patel on Main Street."),
        # Two events on two dates, not one changed fact.
        ("I ran the Berlin half marathon in 2019.", "I ran the Berlin half marathon in 2023."),
        ("We met on 3 March.", "We met on 5 May."),
        # Ordinals name which one, not how many.
        ("My first car was red.", "My second car was red."),
        # No value at all.
        ("I love green tea.", "I love black tea."),
        # A capital that opens the sentence is not a name.
        ("Tennis is my sport.", "Football is my sport."),
    ],
)
def test_other_pairs_do_not_differ(a: str, b: str) -> None:
    assert not values_differ(a, b)
