"""Entity resolution and breadth-first traversal of the relation graph (pure)."""

from __future__ import annotations

import pytest

from memory.graph import (
    USER,
    Edge,
    EntityPath,
    Relation,
    Traversal,
    extract,
    normalise,
    parse_entity,
    role_predicates,
    traverse,
)


def graph_of(*texts: str) -> list[Edge]:
    """Edges as the rules extractor makes them, one memory per text (memory id = position)."""
    edges: list[Edge] = []
    for memory_id, text in enumerate(texts, start=1):
        for r in extract(text):
            edges.append(Edge(len(edges) + 1, r.subject, r.predicate, r.object, memory_id))
    return edges


def triples(found: list[tuple[Edge, int]]) -> list[tuple[str, str, str]]:
    return [(e.subject, e.predicate, e.object) for e, _ in found]


PARSE = [
    ("me", EntityPath(USER)),
    ("I", EntityPath(USER)),
    ("The User", EntityPath(USER)),
    ("myself", EntityPath(USER)),
    ("Dana", EntityPath("dana")),
    ("  DANA  ", EntityPath("dana")),
    ("my manager", EntityPath(USER, ("manager",))),
    ("My Boss", EntityPath(USER, ("manager",))),
    ("my manager's husband", EntityPath(USER, ("manager", "husband"))),
    ("my manager's spouse?", EntityPath(USER, ("manager", "spouse"))),
    ("Dana's husband", EntityPath("dana", ("husband",))),
    ("the user's mom", EntityPath(USER, ("mother",))),
    ("my kids", EntityPath(USER, ("child",))),
    ("my older sister", EntityPath(USER, ("sister",))),
    ("my car", EntityPath(USER, ("car",))),
    ("Los Angeles", EntityPath("los angeles")),
]


@pytest.mark.parametrize(("text", "expected"), PARSE, ids=[p[0] for p in PARSE])
def test_parse_entity(text: str, expected: EntityPath) -> None:
    assert parse_entity(text) == expected


def test_role_families() -> None:
    assert role_predicates("manager") == {"manages"}
    assert {"wife of", "husband of", "spouse of", "married to"} <= role_predicates("spouse")
    assert role_predicates("child") >= {"child of", "son of", "daughter of"}
    assert "son of" not in role_predicates("daughter")


def test_the_multi_hop_example_from_the_role() -> None:
    edges = graph_of("Dana is my manager.", "Dana's husband is Lee.")
    found = traverse("my manager", edges, max_hops=2, max_edges=100)
    assert triples(found) == [("Dana", "manages", USER), ("Lee", "husband of", "Dana")]
    # "who is my manager's spouse?" resolves straight to Lee.
    assert triples(traverse("my manager's spouse", edges, max_hops=1, max_edges=100)) == [
        ("Lee", "husband of", "Dana")
    ]


def test_one_hop_stops_at_direct_edges() -> None:
    edges = graph_of(
        "Dana is my manager.", "Dana's husband is Lee.", "Lee works at the City Hospital."
    )
    assert triples(traverse("Dana", edges, max_hops=1, max_edges=100)) == [
        ("Dana", "manages", USER),
        ("Lee", "husband of", "Dana"),
    ]
    two = traverse("Dana", edges, max_hops=2, max_edges=100)
    assert ("Lee", "works at", "the City Hospital") in triples(two)
    assert [hop for _, hop in two] == [1, 1, 2]


def test_edges_are_undirected_for_reachability() -> None:
    edges = graph_of("Dana is my manager.", "Dana's husband is Lee.")
    assert triples(traverse("Lee", edges, max_hops=2, max_edges=100)) == [
        ("Lee", "husband of", "Dana"),
        ("Dana", "manages", USER),
    ]


def test_the_user_is_reached_but_not_expanded_unless_it_is_the_start() -> None:
    edges = graph_of("Dana is my manager.", "I love sushi.", "I live in Berlin.")
    assert triples(traverse("Dana", edges, max_hops=3, max_edges=100)) == [
        ("Dana", "manages", USER)
    ]
    from_me = triples(traverse("me", edges, max_hops=1, max_edges=100))
    assert from_me == [
        ("Dana", "manages", USER),
        (USER, "loves", "sushi"),
        (USER, "lives in", "Berlin"),
    ]


def test_an_unnamed_role_and_its_named_holder_are_one_node() -> None:
    edges = graph_of("My manager lives in Paris.", "Dana is my manager.")
    # From the name: the alias's edges come at no extra hop.
    assert triples(traverse("Dana", edges, max_hops=1, max_edges=100)) == [
        ("Dana", "manages", USER),
        ("the user's manager", "lives in", "Paris"),
    ]
    # From the role.
    assert set(triples(traverse("my boss", edges, max_hops=1, max_edges=100))) == {
        ("Dana", "manages", USER),
        ("the user's manager", "lives in", "Paris"),
    }
    # From the far end: Paris reaches the alias (hop 1), whose holder's edges are one hop further.
    assert triples(traverse("Paris", edges, max_hops=1, max_edges=100)) == [
        ("the user's manager", "lives in", "Paris"),
    ]
    assert triples(traverse("Paris", edges, max_hops=2, max_edges=100)) == [
        ("the user's manager", "lives in", "Paris"),
        ("Dana", "manages", USER),
    ]


def test_spouse_matches_wife_husband_and_married_to() -> None:
    edges = graph_of("I am married to Chris.", "Chris works at Initech.")
    assert triples(traverse("my spouse", edges, max_hops=1, max_edges=100)) == [
        (USER, "married to", "Chris"),
        ("Chris", "works at", "Initech"),
    ]


def test_the_cap_truncates_in_breadth_first_order() -> None:
    edges = graph_of(*[f"I love dish number {i}." for i in range(10)])
    t = Traversal("me", max_hops=2, max_edges=4)
    while (request := t.wanted()) is not None:
        t.feed(
            e
            for e in edges
            if e.subject.lower() in request.expand or e.object.lower() in request.expand
        )
    assert len(t.edges) == 4 and t.truncated
    assert [e.id for e, _ in t.edges] == [1, 2, 3, 4]


def test_unknown_entity_finds_nothing() -> None:
    edges = graph_of("Dana is my manager.")
    assert traverse("Zed", edges, max_hops=5, max_edges=100) == []
    assert traverse("my sister", edges, max_hops=5, max_edges=100) == []


def test_cycles_terminate_and_each_edge_appears_once() -> None:
    edges = graph_of("Ana is married to Ben.", "Ben is married to Ana.", "Ana is friends with Ben.")
    found = traverse("Ana", edges, max_hops=5, max_edges=100)
    assert len(found) == len({e.id for e, _ in found}) == 3


NORMALISE = [
    (("I", "live in", "Berlin"), (USER, "live in", "Berlin")),
    (("Dana", "is manager of", "me"), ("Dana", "manages", USER)),
    (("Dana", "is the manager of", "the user"), ("Dana", "manages", USER)),
    (("Lee", "Husband Of", "Dana"), ("Lee", "husband of", "Dana")),
    (("My mom", "lives in", "Lisbon"), ("the user's mother", "lives in", "Lisbon")),
    (("Ana", "is sister of", "the user"), ("Ana", "sister of", USER)),
    (("  Ana  ", "works  for", "Acme."), ("Ana", "works at", "Acme")),
]


@pytest.mark.parametrize(("raw", "expected"), NORMALISE)
def test_normalise_foreign_relations(
    raw: tuple[str, str, str], expected: tuple[str, str, str]
) -> None:
    assert normalise(Relation(*raw)) == Relation(*expected)


@pytest.mark.parametrize(
    "raw",
    [
        ("", "likes", "tea"),
        ("me", "is", "I"),
        ("Ana", "likes", "x" * 300),
        ("Ana", "p" * 100, "tea"),
        ("Ana", "likes", "te\x00a"),
    ],
)
def test_normalise_refuses_unusable_relations(raw: tuple[str, str, str]) -> None:
    assert normalise(Relation(*raw)) is None
