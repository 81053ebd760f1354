"""The rules extractor: a table of personal-fact sentences and the edges they must yield."""

from __future__ import annotations

import pytest

from memory.graph import Relation, extract

U = "the user"

#: (sentence, the exact edges the rules extractor must produce, in order)
CASES: list[tuple[str, list[tuple[str, str, str]]]] = [
    # roles toward the user, both ways round
    ("Dana is my manager.", [("Dana", "manages", U)]),
    ("My manager is Dana.", [("Dana", "manages", U)]),
    ("My manager's name is Dana.", [("Dana", "manages", U)]),
    ("My boss, Priya Patel, is very direct.", [("Priya Patel", "manages", U)]),
    ("Tom is my brother.", [("Tom", "brother of", U)]),
    ("My wife is Maria.", [("Maria", "wife of", U)]),
    ("Sam is my best friend.", [("Sam", "best friend of", U)]),
    ("My best friend is Sam.", [("Sam", "best friend of", U)]),
    ("Ava and Ben are my kids.", [("Ava", "child of", U), ("Ben", "child of", U)]),
    ("My kids are Ava and Ben.", [("Ava", "child of", U), ("Ben", "child of", U)]),
    ("Jordan is a friend of mine.", [("Jordan", "friend of", U)]),
    ("Acme is my employer.", [(U, "works at", "Acme")]),
    ("Dana's my manager.", [("Dana", "manages", U)]),
    # roles between other people
    ("Dana's husband is Lee.", [("Lee", "husband of", "Dana")]),
    ("Lee is Dana's husband.", [("Lee", "husband of", "Dana")]),
    ("Lee is my manager's husband.", [("Lee", "husband of", "the user's manager")]),
    (
        "Dana is my manager, and Lee is her husband.",
        [("Dana", "manages", U), ("Lee", "husband of", "Dana")],
    ),
    ("Dana's husband Lee is a chef.", [("Lee", "husband of", "Dana"), ("Lee", "is a", "chef")]),
    # appositives: a role and a name at once
    (
        "My son Colby lives in Los Angeles.",
        [("Colby", "son of", U), ("Colby", "lives in", "Los Angeles")],
    ),
    ("My sister Ana lives in Porto.", [("Ana", "sister of", U), ("Ana", "lives in", "Porto")]),
    (
        "My daughter Emma studies at Stanford.",
        [("Emma", "daughter of", U), ("Emma", "studies at", "Stanford")],
    ),
    (
        "My brother Tom is married to Jess.",
        [("Tom", "brother of", U), ("Tom", "married to", "Jess")],
    ),
    ("Our son Colby plays soccer.", [("Colby", "son of", U), ("Colby", "plays", "soccer")]),
    (
        "My dog Rex is a golden retriever.",
        [("Rex", "dog of", U), ("Rex", "is a", "golden retriever")],
    ),
    ("I have a cat named Miso.", [("Miso", "cat of", U)]),
    ("I have two kids, Ava and Ben.", [("Ava", "child of", U), ("Ben", "child of", U)]),
    (
        "My older brother, Marco, works at Ferrari.",
        [("Marco", "brother of", U), ("Marco", "works at", "Ferrari")],
    ),
    # unnamed role holders become aliases
    ("My mom lives in Lisbon.", [("the user's mother", "lives in", "Lisbon")]),
    ("My father was born in Nairobi.", [("the user's father", "born in", "Nairobi")]),
    ("My parents live in Madrid.", [("the user's parent", "lives in", "Madrid")]),
    # first person
    ("I live in Berlin.", [(U, "lives in", "Berlin")]),
    ("I have lived in Lisbon since 2019.", [(U, "lives in", "Lisbon")]),
    ("Ana Silva has lived in Kyoto for years.", [("Ana Silva", "lives in", "Kyoto")]),
    ("My sister has always lived in Porto.", [("the user's sister", "lives in", "Porto")]),
    ("I have lived in Porto, Lisbon and Faro before.", []),
    ("We live in Boston.", [(U, "lives in", "Boston")]),
    ("I work at Google.", [(U, "works at", "Google")]),
    (
        "I work for Acme Corp as a data engineer.",
        [(U, "works at", "Acme Corp"), (U, "works as", "data engineer")],
    ),
    (
        "I am a nurse at St. Mary's Hospital.",
        [(U, "is a", "nurse"), (U, "works at", "St. Mary's Hospital")],
    ),
    ("I'm married to Chris.", [(U, "married to", "Chris")]),
    ("I am married to Chris.", [(U, "married to", "Chris")]),
    ("I was born in Toronto.", [(U, "born in", "Toronto")]),
    ("I grew up in Ohio.", [(U, "grew up in", "Ohio")]),
    ("I'm originally from Chile.", [(U, "from", "Chile")]),
    ("I moved to Denver in 2020.", [(U, "moved to", "Denver")]),
    (
        "I am allergic to peanuts and shellfish.",
        [(U, "allergic to", "peanuts"), (U, "allergic to", "shellfish")],
    ),
    ("I have a peanut allergy.", [(U, "allergic to", "peanut")]),
    ("Ana Silva has a severe sesame allergy.", [("Ana Silva", "allergic to", "sesame")]),
    ("My son has a tree nut allergy.", [("the user's son", "allergic to", "tree nut")]),
    (
        "I have allergies to cats and dust.",
        [(U, "allergic to", "cats"), (U, "allergic to", "dust")],
    ),
    ("I have an allergy to penicillin.", [(U, "allergic to", "penicillin")]),
    ("Ana has a severe allergy to shellfish.", [("Ana", "allergic to", "shellfish")]),
    ("I have got allergies to dust.", [(U, "allergic to", "dust")]),
    ("I have no allergies.", []),
    ("I have no peanut allergy.", []),
    ("I have seasonal allergies.", []),
    ("I have two allergies.", []),
    ("I love sushi.", [(U, "loves", "sushi")]),
    ("I hate cilantro.", [(U, "hates", "cilantro")]),
    ("I speak Portuguese and Spanish.", [(U, "speaks", "Portuguese"), (U, "speaks", "Spanish")]),
    ("I manage Priya.", [(U, "manages", "Priya")]),
    ("Priya reports to me.", [("Priya", "reports to", U)]),
    (
        "I live in Berlin and work at Siemens.",
        [(U, "lives in", "Berlin"), (U, "works at", "Siemens")],
    ),
    ("By the way, I drive a Tesla.", [(U, "drives", "a Tesla")]),
    # attributes
    ("My name is Sam Lee.", [(U, "named", "Sam Lee")]),
    ("My birthday is March 3.", [(U, "birthday", "March 3")]),
    ("My favourite colour is green.", [(U, "favorite color", "green")]),
    ("Dana's birthday is June 5.", [("Dana", "birthday", "June 5")]),
    # other people's facts
    ("Lee works at the City Hospital.", [("Lee", "works at", "the City Hospital")]),
    ("Ana is married to Paulo.", [("Ana", "married to", "Paulo")]),
    ("Dana manages the platform team.", [("Dana", "manages", "the platform team")]),
    ("Chris works as a nurse.", [("Chris", "works as", "nurse")]),
    ("Jordan is 12 years old.", [("Jordan", "age", "12")]),
    ("I study law.", [(U, "studies", "law")]),
    ("Emma attends Lincoln High.", [("Emma", "attends", "Lincoln High")]),
    (
        "My nephew Theo studies physics in Santiago.",
        [("Theo", "nephew of", U), ("Theo", "studies", "physics")],
    ),
    ("Dana manages my team.", [("Dana", "manages", "the user's team")]),
    # pronouns follow the last person named in the same memory
    (
        "My sister Ana lives in Porto. She works at a bakery.",
        [("Ana", "sister of", U), ("Ana", "lives in", "Porto"), ("Ana", "works at", "a bakery")],
    ),
    (
        "My mom lives in Lisbon. She teaches at the conservatory.",
        [
            ("the user's mother", "lives in", "Lisbon"),
            ("the user's mother", "teaches at", "the conservatory"),
        ],
    ),
    (
        "Dana is my manager.\nDana's husband is Lee.",
        [("Dana", "manages", U), ("Lee", "husband of", "Dana")],
    ),
]

#: Sentences that must yield nothing: negated, past, hedged, conditional, questions, chatter.
NOTHING = [
    "Dana is not my manager.",
    "Dana isn't my manager anymore.",
    "I don't live in Paris anymore.",
    "I no longer work at Google.",
    "Dana was my manager.",
    "Dana is my former manager.",
    "My ex-manager Dana lives in Oslo.",
    "I used to live in Rome.",
    "I might move to Berlin.",
    "I will move to Berlin next year.",
    "If Dana is my manager, ask her.",
    "Where does my son live?",
    "Is Dana my manager?",
    "Remind me to call my mom.",
    "It is a nice day.",
    "The weather is nice.",
    "My manager is nice.",
    "I like it.",
    "She works at a bakery.",
    "Lee is her husband.",
    "I think Dana is my manager.",
    "I have a sister.",
    "I never eat meat.",
    "",
]


@pytest.mark.parametrize(("sentence", "edges"), CASES, ids=[c[0][:48] for c in CASES])
def test_rules_extract_exactly_these_edges(
    sentence: str, edges: list[tuple[str, str, str]]
) -> None:
    assert extract(sentence) == [Relation(*e) for e in edges]


@pytest.mark.parametrize("sentence", NOTHING)
def test_rules_extract_nothing(sentence: str) -> None:
    assert extract(sentence) == []


def test_table_is_large_enough() -> None:
    assert len(CASES) >= 40 and len(NOTHING) >= 10


def test_extraction_is_deterministic_and_deduplicated() -> None:
    text = "I love sushi. I love sushi! My sister Ana lives in Porto."
    first = extract(text)
    assert first == extract(text)
    assert first.count(Relation(U, "loves", "sushi")) == 1


def test_entities_are_trimmed_and_bounded() -> None:
    long_place = "I live in " + " ".join(["Very"] * 40) + "."
    for relation in extract(long_place) + extract("I live in   New    York."):
        assert relation.subject == relation.subject.strip() and "  " not in relation.object
        assert len(relation.object) <= 200
    assert extract("I live in   New    York.") == [Relation(U, "lives in", "New York")]
