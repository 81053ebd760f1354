"""find_conflicts' relation groups: one functional slot, two values, whatever the cosine."""

from __future__ import annotations

import dataclasses

import pytest

from memory.graph import Relation, normalise
from memory.relations import extract_relations

from .helpers import call, cosine, expire, fingerprint, remember_many, sql, stored_edges

HONDA = "The user's car is a red 2019 Honda Civic."
TESLA = "The user's car is a blue 2021 Tesla Model 3."
BERLIN = "I live in Berlin."
LISBON = "I moved to Lisbon last spring."
PEANUTS = "I'm allergic to peanuts."
SHELLFISH = "I'm allergic to shellfish."
# Two near-duplicates, for a similarity group beside the relation ones.
PORTO_TWINS = ["My sister Ana lives in Porto.", "My sister Ana lives in Porto, Portugal."]


async def _extract_all(deps, user: int, ids: list[int], extractor=None) -> None:
    """What the worker does after the writes: every memory's extraction job, inline."""
    for memory_id in ids:
        await extract_relations(deps, user, memory_id, extractor=extractor)


def _relation_groups(out) -> list[list[int]]:
    return [g["ids"] for g in out["groups"] if g["reason"] == "relation"]


async def test_the_car_contradiction_is_found_below_the_threshold(deps, alice):
    assert await cosine(deps, HONDA, TESLA) < 0.80, "the issue's pair: too far apart to cluster"
    honda, tesla = await remember_many(deps, alice, [HONDA, TESLA], tags=["car"])
    twins = await remember_many(deps, alice, PORTO_TWINS, tags=["family"])
    await _extract_all(deps, alice, [honda, tesla, *twins])
    before = await fingerprint(deps, alice)
    out = await call(deps, alice, "find_conflicts")
    assert await fingerprint(deps, alice) == before, "read-only"
    assert out["threshold"] == 0.8
    assert [(g["ids"], g["reason"]) for g in out["groups"]] == [
        ([honda, tesla], "relation"),
        (sorted(twins), "similarity"),
    ], "relation groups first, then the similarity ones"
    group = out["groups"][0]
    assert group["max_similarity"] == pytest.approx(await cosine(deps, HONDA, TESLA), abs=1e-3)
    assert group["pair_count"] == 1
    assert [m["text"] for m in group["memories"]] == [HONDA, TESLA]
    assert out["summary"] == {"groups": 2, "pairs": 2}
    # max_groups cuts similarity groups before relation groups.
    one = await call(deps, alice, "find_conflicts", max_groups=1)
    assert [g["ids"] for g in one["groups"]] == [[honda, tesla]]


async def test_memories_not_yet_extracted_are_read_with_the_rules(deps, alice):
    home = await remember_many(deps, alice, [BERLIN, LISBON], tags=["home"])
    owed = await sql(
        deps, "SELECT count(*) FROM relation_outbox WHERE memory_id = ANY(%s)", (home,)
    )
    assert owed[0][0] == 2, "no job has run: both still owe their extraction"
    out = await call(deps, alice, "find_conflicts")
    assert _relation_groups(out) == [home]
    # Still owed afterwards: the scan wrote nothing.
    again = await sql(
        deps, "SELECT count(*) FROM relation_outbox WHERE memory_id = ANY(%s)", (home,)
    )
    assert again[0][0] == 2


async def test_the_tag_gate_holds_for_relation_groups(deps, alice):
    [honda] = await remember_many(deps, alice, [HONDA], tags=["car"])
    [tesla] = await remember_many(deps, alice, [TESLA], tags=["shopping"])
    await remember_many(deps, alice, [BERLIN, LISBON])  # untagged: never a conflict
    assert (await call(deps, alice, "find_conflicts"))["groups"] == []
    await call(deps, alice, "update_memory", id=tesla, tags=["shopping", "car"])
    assert _relation_groups(await call(deps, alice, "find_conflicts")) == [[honda, tesla]]


async def test_a_non_functional_predicate_never_conflicts(deps, alice):
    ids = await remember_many(deps, alice, [PEANUTS, SHELLFISH], tags=["health"])
    await _extract_all(deps, alice, ids)
    stored = {p for _s, p, _o in await stored_edges(deps, ids)}  # opened if sealed
    assert stored == {"allergic to"}, "both facts are in the graph"
    out = await call(deps, alice, "find_conflicts")
    assert _relation_groups(out) == []
    assert all(g["reason"] == "similarity" for g in out["groups"])


async def test_forgotten_expired_and_other_users_memories_leave(deps, alice, bob):
    honda, tesla = await remember_many(deps, alice, [HONDA, TESLA], tags=["car"])
    berlin, lisbon = await remember_many(deps, alice, [BERLIN, LISBON], tags=["home"])
    [bobs] = await remember_many(deps, bob, [TESLA], tags=["car"])
    await _extract_all(deps, alice, [honda, tesla, berlin, lisbon])
    await _extract_all(deps, bob, [bobs])
    assert sorted(_relation_groups(await call(deps, alice, "find_conflicts"))) == [
        [honda, tesla],
        [berlin, lisbon],
    ]
    await call(deps, alice, "forget", id=tesla)
    await expire(deps, lisbon)
    assert _relation_groups(await call(deps, alice, "find_conflicts")) == []
    assert (await call(deps, bob, "find_conflicts"))["groups"] == []


async def test_an_llm_extractors_relations_fill_the_same_slots(deps, alice):
    class Answering:
        """An extractor answering as an LLM would, normalised the way LLMExtractor does."""

        def __init__(self, answers: dict[str, list[Relation]]) -> None:
            self.answers = answers

        async def extract(self, text: str) -> list[Relation]:
            out = [normalise(r) for r in self.answers[text]]
            return [r for r in out if r is not None]

    texts = ["We settled in Munich in the end.", "Home is Hamburg these days."]
    ids = await remember_many(deps, alice, texts, tags=["home"])
    llm = Answering(
        {
            texts[0]: [Relation("I", "resides in", "Munich")],
            texts[1]: [Relation("the user", "lives in", "Hamburg")],
        }
    )
    await _extract_all(deps, alice, ids, extractor=llm)
    assert _relation_groups(await call(deps, alice, "find_conflicts")) == [ids]


async def test_with_extraction_off_there_are_no_relation_groups(deps, alice):
    ids = await remember_many(deps, alice, [HONDA, TESLA], tags=["car"])
    await _extract_all(deps, alice, ids)
    off = dataclasses.replace(
        deps, settings=dataclasses.replace(deps.settings, relation_extractor="off")
    )
    assert (await call(off, alice, "find_conflicts"))["groups"] == []
    assert _relation_groups(await call(deps, alice, "find_conflicts")) == [ids]


async def test_find_near_duplicates_is_unchanged(deps, alice):
    ids = await remember_many(deps, alice, [HONDA, TESLA], tags=["car"])
    await _extract_all(deps, alice, ids)
    out = await call(deps, alice, "find_near_duplicates")
    assert out["groups"] == []
