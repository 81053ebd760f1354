"""recall, search_memory and build_context_prompt (tools chapter; SUPPLEMENT §4)."""

from __future__ import annotations

import pytest

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

FACTS = [
    "I have a cat named Tom.",
    "I have a dog named Rex.",
    "My son Colby lives in Los Angeles.",
    "My daughter lives in Boston.",
    "I love eating sushi.",
    "I enjoy pizza on Fridays.",
    "I work as a software engineer.",
    "My favourite colour is blue.",
    "I am allergic to peanuts.",
    "I play tennis on weekends.",
]

HEAD = "The following are previously known facts:\n\n"
SEP = "\n\n-----------------\n\nThe following is the user's prompt:\n\n"
NO_FACTS = "No relevant previously known facts were found."


@pytest.fixture
async def facts(deps, alice):
    ids = await remember_many(deps, alice, FACTS)
    return dict(zip(FACTS, ids, strict=True))


@pytest.mark.parametrize("tool", ["recall", "search_memory"])
async def test_match_fields_and_raw_cosine_score(deps, alice, tool):
    out = await call(
        deps,
        alice,
        "remember",
        text="My son Colby lives in Los Angeles.",
        tags=["family"],
        source_provider="openai",
        capture_mode="explicit",
    )
    got = await call(deps, alice, tool, query="where does my son live")
    assert got["ok"] is True
    [m] = got["matches"]
    assert_fields(m, MATCH_FIELDS)
    assert isinstance(m["score"], float)
    assert m["id"] == out["memory_id"]
    assert m["text"] == "My son Colby lives in Los Angeles."
    assert m["tags"] == ["family"]
    assert m["source_provider"] == "openai"
    assert m["capture_mode"] == "explicit"
    assert m["score"] == pytest.approx(
        await cosine(deps, "where does my son live", "My son Colby lives in Los Angeles."), abs=2e-3
    )


async def test_search_memory_is_an_alias_of_recall(deps, alice, facts):
    for args in ({"query": "what pets do I have"}, {"query": "food", "limit": 3, "min_score": 0.1}):
        a = await call(deps, alice, "recall", **args)
        b = await call(deps, alice, "search_memory", **args)
        assert a == b


async def test_ordered_by_similarity_best_first(deps, alice, facts):
    got = await call(deps, alice, "recall", query="where does my son live", limit=10)
    assert got["matches"][0]["id"] == facts["My son Colby lives in Los Angeles."]
    scores = [m["score"] for m in got["matches"]]
    assert scores == sorted(scores, reverse=True)  # no learning yet: order == cosine order
    assert len(got["matches"]) == 10


async def test_default_limit_is_eight(deps, alice, facts):
    got = await call(deps, alice, "recall", query="tell me about myself")
    assert len(got["matches"]) == deps.settings.default_recall_limit == 8


async def test_limit(deps, alice, facts):
    got = await call(deps, alice, "recall", query="what do I like to eat", limit=2)
    assert [m["text"] for m in got["matches"]] == [
        "I love eating sushi.",
        "I enjoy pizza on Fridays.",
    ]


async def test_limit_above_max_is_capped_not_an_error(deps, alice):
    await remember_many(
        deps, alice, [f"Remembered fact number {i} about gardening." for i in range(60)]
    )
    got = await call(deps, alice, "recall", query="gardening", limit=500)
    assert len(got["matches"]) == deps.settings.max_recall_limit == 50
    got = await call(deps, alice, "search_memory", query="gardening", limit=51)
    assert len(got["matches"]) == 50
    prompt = (
        await call(deps, alice, "build_context_prompt", user_prompt="gardening", limit=10**6)
    )["prompt"]
    body = prompt[len(HEAD) : prompt.index(SEP)]
    assert len(body.split("\n\n")) == 50


@pytest.mark.parametrize("tool", ["recall", "search_memory", "build_context_prompt"])
@pytest.mark.parametrize("limit", [0, -1, -100])
async def test_non_positive_limit_is_invalid(deps, alice, tool, limit):
    key = "user_prompt" if tool == "build_context_prompt" else "query"
    await fails(deps, alice, tool, "INVALID_INPUT", **{key: "cats", "limit": limit})


async def test_min_score_filters_on_raw_cosine(deps, alice, facts):
    everything = await call(deps, alice, "recall", query="What pet do I have?", limit=10)
    cut = await call(deps, alice, "recall", query="What pet do I have?", limit=10, min_score=0.4)
    assert cut["matches"] and all(m["score"] >= 0.4 for m in cut["matches"])
    assert [m["id"] for m in cut["matches"]] == [
        m["id"] for m in everything["matches"] if m["score"] >= 0.4
    ]
    assert {m["text"] for m in cut["matches"]} == {
        "I have a cat named Tom.",
        "I have a dog named Rex.",
    }
    assert (await call(deps, alice, "recall", query="What pet do I have?", min_score=0.99))[
        "matches"
    ] == []


async def test_tag_filter_with_normalization_and_synonyms(deps, alice):
    fam = await call(
        deps, alice, "remember", text="My son Colby lives in Los Angeles.", tags=["family"]
    )
    work = await call(deps, alice, "remember", text="My office is in Los Angeles.", tags=["work"])
    await call(deps, alice, "remember", text="Los Angeles is sunny.", tags=[])
    got = await call(deps, alice, "recall", query="Los Angeles", tags=["FAM"])
    assert [m["id"] for m in got["matches"]] == [fam["memory_id"]]
    got = await call(deps, alice, "recall", query="Los Angeles", tags=["relatives", "career"])
    assert {m["id"] for m in got["matches"]} == {fam["memory_id"], work["memory_id"]}
    got = await call(deps, alice, "recall", query="Los Angeles", tags=["hobbies"])
    assert got["matches"] == []


async def test_deleted_and_expired_rows_never_recalled(deps, alice, facts):
    cat, dog = facts["I have a cat named Tom."], facts["I have a dog named Rex."]
    await call(deps, alice, "forget", id=cat)
    await expire(deps, dog)
    for tool in ("recall", "search_memory"):
        got = await call(deps, alice, tool, query="What pet do I have?", limit=50)
        ids = {m["id"] for m in got["matches"]}
        assert cat not in ids and dog not in ids
        assert len(ids) == len(FACTS) - 2


async def test_recall_changes_nothing(deps, alice, facts):
    before = await fingerprint(deps, alice)
    await call(deps, alice, "recall", query="What pet do I have?")
    await call(deps, alice, "search_memory", query="What pet do I have?")
    await call(deps, alice, "build_context_prompt", user_prompt="What pet do I have?")
    assert await fingerprint(deps, alice) == before


async def test_learning_changes_order_but_not_reported_score(deps, alice, facts):
    cat, dog = facts["I have a cat named Tom."], facts["I have a dog named Rex."]
    before = await call(deps, alice, "recall", query="What pet do I have?", limit=2)
    assert [m["id"] for m in before["matches"]] == [dog, cat]
    scores = {m["id"]: m["score"] for m in before["matches"]}
    # confirm counts as positive feedback (SUPPLEMENT §4): twice lifts the cat above the dog.
    await call(deps, alice, "confirm", id=cat)
    await call(deps, alice, "confirm", id=cat)
    after = await call(deps, alice, "recall", query="What pet do I have?", limit=2)
    assert [m["id"] for m in after["matches"]] == [cat, dog]
    assert {m["id"]: m["score"] for m in after["matches"]} == scores
    assert after["matches"][0]["salience"] > 0 and after["matches"][0]["use_count"] == 2


async def test_empty_store_recalls_nothing(deps, alice):
    assert (await call(deps, alice, "recall", query="anything"))["matches"] == []


# --- build_context_prompt ---------------------------------------------------------------


async def test_prompt_envelope_exact(deps, alice, facts):
    ranked = await call(deps, alice, "recall", query="what do I like to eat", limit=3)
    texts = [m["text"] for m in ranked["matches"]]
    out = await call(
        deps, alice, "build_context_prompt", user_prompt="what do I like to eat", limit=3
    )
    assert out["ok"] is True
    assert out["prompt"] == HEAD + "\n\n".join(texts) + SEP + "what do I like to eat"


async def test_prompt_default_limit_is_eight(deps, alice, facts):
    out = await call(deps, alice, "build_context_prompt", user_prompt="tell me about myself")
    body = out["prompt"][len(HEAD) : out["prompt"].index(SEP)]
    assert len(body.split("\n\n")) == 8


async def test_prompt_no_facts_message(deps, alice, facts):
    out = await call(
        deps, alice, "build_context_prompt", user_prompt="What pet do I have?", min_score=0.99
    )
    assert out["prompt"] == HEAD + NO_FACTS + SEP + "What pet do I have?"


async def test_prompt_no_facts_on_empty_store(deps, alice):
    out = await call(deps, alice, "build_context_prompt", user_prompt="Hello there")
    assert out["prompt"] == HEAD + NO_FACTS + SEP + "Hello there"


async def test_prompt_greedy_packing_with_max_chars(deps, alice, facts):
    q = "what do I like to eat"
    ranked = [m["text"] for m in (await call(deps, alice, "recall", query=q, limit=3))["matches"]]

    def size(n: int) -> int:
        return len(HEAD + "\n\n".join(ranked[:n]) + SEP + q)

    for n in (1, 2, 3):
        exact = await call(
            deps, alice, "build_context_prompt", user_prompt=q, limit=3, max_chars=size(n)
        )
        assert exact["prompt"] == HEAD + "\n\n".join(ranked[:n]) + SEP + q
        assert len(exact["prompt"]) <= size(n)
    one_short = await call(
        deps, alice, "build_context_prompt", user_prompt=q, limit=3, max_chars=size(2) - 1
    )
    assert one_short["prompt"] == HEAD + ranked[0] + SEP + q
    # At least one fact is always included when any matched, even past max_chars.
    tiny = await call(deps, alice, "build_context_prompt", user_prompt=q, limit=3, max_chars=10)
    assert tiny["prompt"] == HEAD + ranked[0] + SEP + q


async def test_prompt_respects_tags_and_deletions(deps, alice):
    await call(deps, alice, "remember", text="My son Colby lives in Los Angeles.", tags=["family"])
    gone = await call(
        deps, alice, "remember", text="My son Colby used to live in Boston.", tags=["family"]
    )
    await call(deps, alice, "remember", text="My office is in Los Angeles.", tags=["work"])
    await call(deps, alice, "forget", id=gone["memory_id"])
    out = await call(
        deps, alice, "build_context_prompt", user_prompt="where does my son live", tags=["fam"]
    )
    assert (
        out["prompt"]
        == HEAD + "My son Colby lives in Los Angeles." + SEP + "where does my son live"
    )


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"user_prompt": ""},
        {"user_prompt": "   "},
        {"user_prompt": 42},
        {"user_prompt": "hi", "max_chars": 0},
        {"user_prompt": "hi", "max_chars": -5},
        {"user_prompt": "hi", "max_chars": "100"},
        {"user_prompt": "hi", "min_score": 1.5},
        {"user_prompt": "hi", "min_score": -0.1},
        {"user_prompt": "hi", "tags": "family"},
    ],
)
async def test_prompt_invalid_input(deps, alice, args):
    await fails(deps, alice, "build_context_prompt", "INVALID_INPUT", **args)


@pytest.mark.parametrize("tool", ["recall", "search_memory"])
@pytest.mark.parametrize(
    "args",
    [
        {},
        {"query": ""},
        {"query": None},
        {"query": ["cats"]},
        {"query": "cats", "limit": "5"},
        {"query": "cats", "limit": True},
        {"query": "cats", "limit": 2.5},
        {"query": "cats", "min_score": 2},
        {"query": "cats", "min_score": "0.5"},
        {"query": "cats", "min_score": False},
        {"query": "cats", "tags": "family"},
        {"query": "cats", "tags": [1, 2]},
    ],
)
async def test_recall_invalid_input(deps, alice, tool, args):
    await fails(deps, alice, tool, "INVALID_INPUT", **args)
