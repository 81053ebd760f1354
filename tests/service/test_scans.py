"""find_near_duplicates and find_conflicts: transitive groups, strongest first, active rows of one user."""

from __future__ import annotations

import pytest

from memory.rules.clusters import unique_pairs
from memory.scans import qualifying_pairs

from .helpers import (
    MATCH_FIELDS,
    assert_fields,
    call,
    cosine,
    expire,
    fails,
    fingerprint,
    remember_many,
)

# a~b and b~c at 0.92, but not a~c: one group only through b.
CHAIN = [
    "My sister Ana lives in Porto.",
    "My sister Ana lives in Porto, Portugal.",
    "My sister Ana lives in Porto, Portugal, by the river Douro.",
]
ALLERGY = ["I am allergic to peanuts.", "I'm allergic to peanuts."]
UNRELATED = [
    "I play tennis on Sundays.",
    "My favourite colour is green.",
    "The car needs new tyres.",
]


async def _store(deps, user, texts, **kw):
    return await remember_many(deps, user, texts, **kw)


async def test_groups_are_transitive_sorted_and_shaped(deps, alice):
    chain = await _store(deps, alice, CHAIN)
    allergy = await _store(deps, alice, ALLERGY)
    await _store(deps, alice, UNRELATED)
    ab, bc, ac = (
        await cosine(deps, CHAIN[0], CHAIN[1]),
        await cosine(deps, CHAIN[1], CHAIN[2]),
        await cosine(deps, CHAIN[0], CHAIN[2]),
    )
    assert min(ab, bc) >= 0.92 > ac, "the chain is only transitively similar"
    strongest = await cosine(deps, *ALLERGY)
    assert strongest > max(ab, bc)

    before = await fingerprint(deps, alice)
    out = await call(deps, alice, "find_near_duplicates")
    assert await fingerprint(deps, alice) == before, "read-only"
    assert out["threshold"] == 0.92
    assert [g["ids"] for g in out["groups"]] == [sorted(allergy), sorted(chain)]
    first, second = out["groups"]
    assert first["pair_count"] == 1 and first["max_similarity"] == pytest.approx(
        strongest, abs=1e-4
    )
    assert second["pair_count"] == 2 and second["max_similarity"] == pytest.approx(
        max(ab, bc), abs=1e-4
    )
    assert out["summary"] == {"groups": 2, "pairs": 3}
    for group in out["groups"]:
        assert [m["id"] for m in group["memories"]] == group["ids"]
        for memory in group["memories"]:
            assert_fields(memory, MATCH_FIELDS)
            assert "score" not in memory


async def test_threshold_decides_what_qualifies(deps, alice):
    await _store(deps, alice, CHAIN + ALLERGY + UNRELATED)
    strict = await call(deps, alice, "find_near_duplicates", threshold=0.98)
    assert strict["groups"] == [] and strict["summary"] == {"groups": 0, "pairs": 0}
    loose = await call(deps, alice, "find_near_duplicates", threshold=0.9)
    chain = next(g for g in loose["groups"] if len(g["ids"]) == 3)
    assert chain["pair_count"] == 3, "at 0.90 a~c qualifies too"


async def test_max_groups_keeps_the_strongest(deps, alice):
    allergy = await _store(deps, alice, ALLERGY)
    await _store(deps, alice, CHAIN)
    out = await call(deps, alice, "find_near_duplicates", max_groups=1)
    assert [g["ids"] for g in out["groups"]] == [sorted(allergy)]
    assert out["summary"] == {"groups": 1, "pairs": 1}
    # 500 is the chapter's hard cap; above it is INVALID_INPUT (test_bad_input), not a clamp.
    widest = await call(deps, alice, "find_near_duplicates", max_groups=500)
    assert len(widest["groups"]) == 2


async def test_deleted_expired_and_other_users_rows_are_left_out(deps, alice, bob):
    chain = await _store(deps, alice, CHAIN)
    allergy = await _store(deps, alice, ALLERGY)
    await _store(deps, bob, CHAIN + ALLERGY)
    await call(deps, alice, "forget", id=chain[1])  # the link of the chain
    await expire(deps, allergy[0])
    out = await call(deps, alice, "find_near_duplicates", threshold=0.92)
    assert out["groups"] == []
    bobs = await call(deps, bob, "find_near_duplicates", threshold=0.92)
    assert len(bobs["groups"]) == 2
    assert not {i for g in bobs["groups"] for i in g["ids"]} & set(chain + allergy)


async def test_hard_deleted_rows_are_gone_from_groups(deps, alice):
    allergy = await _store(deps, alice, ALLERGY)
    await call(deps, alice, "forget", id=allergy[0], hard_delete=True)
    assert (await call(deps, alice, "find_near_duplicates"))["groups"] == []


async def test_conflicts_need_a_shared_tag(deps, alice):
    a, b = await _store(deps, alice, CHAIN[:2], tags=["family"])
    [c] = await _store(deps, alice, CHAIN[2:], tags=["places"])
    await _store(deps, alice, ALLERGY)  # similar, but untagged: never a conflict
    out = await call(deps, alice, "find_conflicts")
    assert out["threshold"] == 0.8
    assert [g["ids"] for g in out["groups"]] == [sorted([a, b])]
    assert out["groups"][0]["memories"][0]["tags"] == ["family"]


async def test_conflicts_find_same_topic_facts_that_differ(deps, alice):
    facts = ["My sister Ana lives in Porto.", "My sister Ana lives in Lisbon."]
    old, new = await _store(deps, alice, facts, tags=["family"])
    await _store(deps, alice, UNRELATED, tags=["family"])
    assert 0.8 <= await cosine(deps, *facts) < 0.92
    assert (await call(deps, alice, "find_near_duplicates"))["groups"] == []
    out = await call(deps, alice, "find_conflicts")
    assert [g["ids"] for g in out["groups"]] == [sorted([old, new])]


async def test_conflict_groups_are_transitive_through_shared_tags(deps, alice):
    a, b, c = await _store(deps, alice, CHAIN, tags=["family"])
    out = await call(deps, alice, "find_conflicts", threshold=0.93)
    assert [g["ids"] for g in out["groups"]] == [sorted([a, b, c])]


async def test_empty_and_tiny_stores(deps, alice):
    assert (await call(deps, alice, "find_near_duplicates"))["groups"] == []
    await _store(deps, alice, CHAIN[:1])
    assert (await call(deps, alice, "find_conflicts"))["groups"] == []


@pytest.mark.parametrize("tool", ["find_near_duplicates", "find_conflicts"])
@pytest.mark.parametrize(
    "args",
    [
        {"threshold": 0.49},
        {"threshold": 1.01},
        {"threshold": "high"},
        {"threshold": True},
        {"max_groups": 0},
        {"max_groups": 501},
        {"max_groups": 100_000},
        {"max_groups": -3},
        {"max_groups": 2.5},
        {"max_groups": "10"},
    ],
)
async def test_bad_input(deps, alice, tool, args):
    await fails(deps, alice, tool, "INVALID_INPUT", **args)


@pytest.mark.parametrize("tool", ["find_near_duplicates", "find_conflicts"])
async def test_threshold_bounds_are_inclusive(deps, alice, tool):
    for threshold in (0.5, 1.0):
        assert (await call(deps, alice, tool, threshold=threshold))["threshold"] == threshold


@pytest.mark.parametrize("shared_tag", [False, True])
async def test_the_index_path_agrees_with_the_in_memory_path(deps, alice, shared_tag):
    """Stores above the in-memory limit use batched HNSW queries; on a small store both are exact."""
    await _store(deps, alice, CHAIN + ALLERGY, tags=["family"])
    await _store(deps, alice, UNRELATED + ["My sister Ana lives in Porto!"])
    in_memory = await qualifying_pairs(deps, alice, threshold=0.85, shared_tag=shared_tag)
    by_index = await qualifying_pairs(
        deps, alice, threshold=0.85, shared_tag=shared_tag, in_memory_limit=0
    )
    assert in_memory
    a, b = unique_pairs(in_memory), unique_pairs(by_index)
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] == pytest.approx(b[key], abs=1e-5)
