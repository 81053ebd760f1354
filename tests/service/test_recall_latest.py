"""Latest truth first: recalled memories that disagree about one thing, the freshest first.

recall (and search_memory, build_context_prompt) reorder matches that say
different things about one thing (a functional relation slot, a ``downweights``
record, near-duplicates with different values): the most recently confirmed
one takes the group's place and each older one names it in ``older_than``.
``score`` stays the raw cosine.
"""

from __future__ import annotations

import dataclasses

from memory.relations import extract_relations

from .helpers import call, cosine

LISBON = "I live in Lisbon."
BERLIN = "I moved to Berlin last spring."
WHERE = "where do I live?"


async def _remember(deps, user: int, text: str, **args) -> int:
    return (await call(deps, user, "remember", text=text, dedup_policy="insert", **args))[
        "memory_id"
    ]


def _ids(out) -> list[int]:
    return [m["id"] for m in out["matches"]]


def _by_id(out) -> dict[int, dict]:
    return {m["id"]: m for m in out["matches"]}


async def test_a_newer_home_comes_first_and_the_old_one_says_it_is_older(deps, alice):
    lisbon = await _remember(deps, alice, LISBON)
    berlin = await _remember(deps, alice, BERLIN)
    # By relevance alone the old fact would lead: it matches the question better.
    assert await cosine(deps, WHERE, LISBON) > await cosine(deps, WHERE, BERLIN)
    off = dataclasses.replace(
        deps, settings=dataclasses.replace(deps.settings, recall_latest_first=False)
    )
    plain = await call(off, alice, "recall", query=WHERE)
    assert _ids(plain)[:2] == [lisbon, berlin]
    assert "older_than" not in _by_id(plain)[lisbon]

    out = await call(deps, alice, "recall", query=WHERE, explain=True)
    assert _ids(out)[:2] == [berlin, lisbon]
    matches = _by_id(out)
    assert matches[lisbon]["older_than"] == [berlin]
    assert "older_than" not in matches[berlin]
    assert matches[berlin]["explain"]["latest_first"] is True
    assert matches[lisbon]["explain"]["latest_first"] is False
    # The score is still each memory's raw cosine.
    assert matches[lisbon]["score"] == _by_id(plain)[lisbon]["score"]


async def test_extracted_relations_count_as_well_as_owed_ones(deps, alice):
    lisbon = await _remember(deps, alice, LISBON)
    berlin = await _remember(deps, alice, BERLIN)
    for memory_id in (lisbon, berlin):  # what the worker does after the writes
        await extract_relations(deps, alice, memory_id)
    out = await call(deps, alice, "recall", query=WHERE)
    assert _ids(out)[:2] == [berlin, lisbon]


async def test_confirming_the_old_fact_makes_it_the_latest_truth(deps, alice):
    lisbon = await _remember(deps, alice, LISBON)
    berlin = await _remember(deps, alice, BERLIN)
    await call(deps, alice, "confirm", id=lisbon)
    out = await call(deps, alice, "recall", query=WHERE)
    assert _ids(out)[:2] == [lisbon, berlin]
    assert _by_id(out)[berlin]["older_than"] == [lisbon]


async def test_a_newer_value_below_the_limit_is_brought_up(deps, alice):
    lisbon = await _remember(deps, alice, LISBON)
    for text in ("I live near the river.", "I like living in a big city.", "My flat is small."):
        await _remember(deps, alice, text)
    berlin = await _remember(deps, alice, BERLIN)
    off = dataclasses.replace(
        deps, settings=dataclasses.replace(deps.settings, recall_latest_first=False)
    )
    plain = _ids(await call(off, alice, "recall", query=WHERE, limit=3))
    assert lisbon in plain and berlin not in plain
    out = _ids(await call(deps, alice, "recall", query=WHERE, limit=3))
    # Berlin takes Lisbon's place, Lisbon follows it, the last of the three drops out.
    at = plain.index(lisbon)
    assert out == [*plain[:at], berlin, *plain[at:]][:3]


async def test_a_downweighted_memory_names_what_superseded_it(deps, alice):
    acme = await _remember(deps, alice, "My employer is Acme Corp.")
    globex = await _remember(deps, alice, "I have a new job at Globex.", downweights=[acme])
    out = await call(deps, alice, "recall", query="who is my employer?")
    matches = _by_id(out)
    assert _ids(out).index(globex) < _ids(out).index(acme)
    assert matches[acme]["superseded_by"] == [globex]
    assert matches[acme]["older_than"] == [globex]


async def test_near_duplicates_with_different_numbers_put_the_newest_first(deps, alice):
    two = await _remember(deps, alice, "I have two kids.")
    three = await _remember(deps, alice, "I have three kids.")
    await _remember(deps, alice, "My kids love football.")
    out = await call(deps, alice, "recall", query="how many kids do I have")
    ids = _ids(out)
    assert ids.index(three) < ids.index(two)
    assert _by_id(out)[two]["older_than"] == [three]


async def test_agreeing_memories_are_not_marked(deps, alice):
    first = await _remember(deps, alice, "My dentist is Dr. Okafor on Elm Street.")
    second = await _remember(deps, alice, "My dentist is Dr. Okafor, on Elm Street.")
    await _remember(deps, alice, "I live in Lisbon.")
    out = await call(deps, alice, "recall", query="who is my dentist?")
    assert {first, second} <= set(_ids(out))
    assert not any("older_than" in m or "superseded_by" in m for m in out["matches"])


async def test_another_users_facts_never_reorder_or_mark_mine(deps, alice, bob):
    lisbon = await _remember(deps, alice, LISBON)
    await _remember(deps, bob, BERLIN)
    await _remember(deps, bob, "I have three kids.")
    out = await call(deps, alice, "recall", query=WHERE)
    assert _ids(out) == [lisbon]
    assert "older_than" not in out["matches"][0]


async def test_the_context_prompt_states_the_latest_truth_first(deps, alice):
    await _remember(deps, alice, LISBON)
    await _remember(deps, alice, BERLIN)
    out = await call(deps, alice, "build_context_prompt", user_prompt=WHERE)
    assert out["prompt"].index(BERLIN) < out["prompt"].index(LISBON)


async def test_search_memory_orders_the_same_way(deps, alice):
    lisbon = await _remember(deps, alice, LISBON)
    berlin = await _remember(deps, alice, BERLIN)
    out = await call(deps, alice, "search_memory", query=WHERE)
    assert _ids(out)[:2] == [berlin, lisbon]
