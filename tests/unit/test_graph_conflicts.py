"""Personal-fact wordings the rules must read, and the functional slots find_conflicts compares."""

from __future__ import annotations

import pytest

from memory.graph import Relation, conflicts, extract, is_functional, slot_of, values_match

U = "the user"

#: Wordings people and assistants write -> the exact edges expected.
WORDINGS: list[tuple[str, list[tuple[str, str, str]]]] = [
    ("The user's car is a red 2019 Honda Civic.", [(U, "car", "red 2019 Honda Civic")]),
    ("User's car is a Tesla Model 3.", [(U, "car", "Tesla Model 3")]),
    ("My car is an old Volvo.", [(U, "car", "old Volvo")]),
    ("I drive a Subaru Outback.", [(U, "drives", "a Subaru Outback")]),
    ("User lives in Berlin.", [(U, "lives in", "Berlin")]),
    ("user works at Siemens.", [(U, "works at", "Siemens")]),
    ("I moved to Lisbon last year.", [(U, "moved to", "Lisbon")]),
    ("I've just moved to Porto.", [(U, "moved to", "Porto")]),
    ("I'm based in Toronto.", [(U, "lives in", "Toronto")]),
    ("My partner is Sam.", [("Sam", "partner of", U)]),
    ("The user is married to Lee.", [(U, "married to", "Lee")]),
    (
        "I'm allergic to peanuts and shellfish.",
        [(U, "allergic to", "peanuts"), (U, "allergic to", "shellfish")],
    ),
    ("My favourite colour is green.", [(U, "favorite color", "green")]),
    ("The user's favorite food is sushi.", [(U, "favorite food", "sushi")]),
    ("I work for the BBC.", [(U, "works at", "the BBC")]),
    ("I work remotely for Shopify.", [(U, "works at", "Shopify")]),
    ("I got a new job at Stripe.", [(U, "works at", "Stripe")]),
    (
        "I study computer science at MIT.",
        [(U, "studies", "computer science"), (U, "studies at", "MIT")],
    ),
    ("I'm studying medicine at Oxford.", [(U, "studies", "medicine"), (U, "studies at", "Oxford")]),
    ("I am a student at Stanford.", [(U, "studies at", "Stanford")]),
    ("My birthday is on the 3rd of March.", [(U, "birthday", "3rd of March")]),
    ("The user's birthday is June 12.", [(U, "birthday", "June 12")]),
    ("I own a cat.", [(U, "owns", "a cat")]),
    ("My sister Ana's birthday is May 3.", [("Ana", "sister of", U), ("Ana", "birthday", "May 3")]),
    ("My sister Ana's husband is Lee.", [("Ana", "sister of", U), ("Lee", "husband of", "Ana")]),
]

#: Sentences that must not name a car (or anything) although they use the words.
NO_CAR = [
    "I drive to work every day.",
    "I drive carefully.",
    "My car is in the shop.",
    "My car is red.",
]


@pytest.mark.parametrize(("sentence", "edges"), WORDINGS, ids=[w[0][:48] for w in WORDINGS])
def test_personal_fact_wordings(sentence: str, edges: list[tuple[str, str, str]]) -> None:
    assert extract(sentence) == [Relation(*e) for e in edges]


@pytest.mark.parametrize("sentence", NO_CAR)
def test_no_car_is_made_up(sentence: str) -> None:
    assert extract(sentence) == []


def _pairs(*texts: str) -> list[tuple[int, int]]:
    facts = [(i, r) for i, t in enumerate(texts) for r in extract(t)]
    return [(c.first, c.second) for c in conflicts(facts)]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (
            "The user's car is a red 2019 Honda Civic.",
            "The user's car is a blue 2021 Tesla Model 3.",
        ),
        ("My car is a Honda Civic.", "I drive a Tesla Model 3."),
        ("I live in Berlin.", "I moved to Paris."),
        ("User lives in Berlin.", "I'm based in Toronto."),
        ("I work at Google.", "I work for Microsoft."),
        ("My partner is Sam.", "My wife is Kim."),
        ("I am married to Lee.", "My husband is Jordan."),
        ("My birthday is March 3.", "My birthday is 4 May."),
        ("My favourite colour is green.", "My favorite color is blue."),
        ("I study law at Yale.", "I am a student at Harvard."),
        ("Dana lives in Lisbon.", "Dana lives in Madrid."),
        ("My mother is Rosa.", "My mom is Elena."),
    ],
)
def test_different_values_of_a_functional_slot_conflict(first: str, second: str) -> None:
    assert _pairs(first, second) == [(0, 1)]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # Not functional: several values are normal.
        ("I'm allergic to peanuts.", "I'm allergic to shellfish."),
        ("I own a Honda.", "I own a bike."),
        ("I love sushi.", "I love ramen."),
        ("I study law.", "I study French."),
        # The same value, worded differently.
        ("I live in Berlin.", "I moved to Berlin."),
        ("My car is a red 2019 Honda Civic.", "I drive a Honda Civic."),
        ("My birthday is March 3.", "My birthday is on the 3rd of March."),
        ("I work at Acme.", "I work for Acme Corp."),
        ("My partner is Sam.", "I am married to Sam Lee."),
        # Different slots or different owners.
        ("My favourite colour is green.", "My favourite food is pizza."),
        ("I live in Berlin.", "My sister Ana lives in Porto."),
        ("Dana lives in Lisbon.", "Ben lives in Madrid."),
    ],
)
def test_agreeing_or_unrelated_facts_do_not_conflict(first: str, second: str) -> None:
    assert _pairs(first, second) == []


def test_values_within_one_memory_are_not_compared() -> None:
    assert _pairs("I live in Berlin and I moved to Paris.") == []


def test_a_memory_agreeing_on_one_value_does_not_conflict() -> None:
    # "favourite foods" of one memory: one of them matches the other memory's.
    facts = [
        (1, Relation(U, "favorite food", "sushi")),
        (1, Relation(U, "favorite food", "ramen")),
        (2, Relation(U, "favorite food", "ramen")),
        (3, Relation(U, "favorite food", "pizza")),
    ]
    assert [(c.first, c.second) for c in conflicts(facts)] == [(1, 3), (2, 3)]


def test_functional_predicates_are_the_documented_ones() -> None:
    for predicate in (
        "lives in",
        "moved to",
        "works at",
        "studies at",
        "car",
        "drives",
        "birthday",
        "born on",
        "partner of",
        "wife of",
        "married to",
        "mother of",
        "favorite color",
        "favourite colour",
    ):
        assert is_functional(predicate), predicate
    for predicate in ("owns", "allergic to", "likes", "loves", "studies", "works as", "friend of"):
        assert not is_functional(predicate), predicate


def test_llm_style_relations_fill_the_same_slots() -> None:
    # What an LLM extractor returns after memory.graph.normalise: the same slots.
    facts = [
        (1, Relation(U, "resides in", "Berlin")),
        (2, Relation(U, "lives in", "Munich")),
        (3, Relation(U, "favourite colour", "green")),
        (4, Relation(U, "favorite color", "Green")),
    ]
    assert [(c.first, c.second) for c in conflicts(facts)] == [(1, 2)]


def test_role_slots_belong_to_the_owner_not_the_holder() -> None:
    [(slot, value)] = slot_of(Relation("Sam", "partner of", U))
    assert (slot.owner, slot.name, value) == (U, "partner", "Sam")
    sides = slot_of(Relation(U, "married to", "Lee"))
    assert {(s.owner, v) for s, v in sides} == {(U, "Lee"), ("lee", U)}


def test_value_matching() -> None:
    assert values_match("car", "a red Honda Civic", "Honda Civic")
    assert not values_match("car", "Honda Civic", "Tesla Model 3")
    assert values_match("birthday", "2020-03-03", "March 3rd")
    assert not values_match("birthday", "March 3", "March 4")
    assert values_match("lives in", "the", "Berlin"), "nothing to compare is never a conflict"
