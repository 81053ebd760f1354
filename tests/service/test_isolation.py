"""Two users: no tool reads, counts, changes, forgets, exports or lists tags of the other's
rows, and another user's id answers exactly like a missing one (SUPPLEMENT §1)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from api.mcp.tools import tool_specs
from config.settings import Settings
from memory.errors import MemoryServiceError
from tests.tool_calls import USE_CASES
from tests.tool_samples import sample_arguments

from .helpers import call, fingerprint, get, remember_many

BOB_FACTS = [
    "My son Colby lives in Los Angeles.",
    "I have a cat named Tom.",
    "I am allergic to peanuts.",
    "My favourite colour is blue.",
]


@pytest.fixture
async def two(deps, alice, bob):
    """Bob: four active rows (one kept), one tombstone, all tagged. Alice: one row."""
    bob_ids = await remember_many(
        deps, bob, BOB_FACTS, tags=["family", "bobtag"], source_provider="bobs-llm"
    )
    kept = (
        await call(
            deps,
            bob,
            "remember",
            text="Bob's blood type is O negative.",
            keep=True,
            tags=["health"],
        )
    )["memory_id"]
    tomb = (
        await call(deps, bob, "remember", text="I work at the bakery downtown.", tags=["work"])
    )["memory_id"]
    await call(deps, bob, "forget", id=tomb, reason="bob quit")
    alice_id = (
        await call(deps, alice, "remember", text="I play tennis on weekends.", tags=["sport"])
    )["memory_id"]
    return {"bob": bob_ids, "bob_kept": kept, "bob_tomb": tomb, "alice": alice_id}


async def _outcome(deps: Any, user: int, tool: str, args: dict[str, Any]) -> Any:
    try:
        return ("ok", await USE_CASES[tool](deps, user, args))
    except MemoryServiceError as ex:
        return ("error", ex.code, ex.message, ex.detail)


#: The registry, as the server builds it: the check below covers every tool in it.
SPECS = tool_specs(Settings())
#: What of Bob's would betray a leak: his texts, his tags, his provider.
BOB_MARKS = [*BOB_FACTS, "blood type", "bakery", "bobtag", "bobs-llm", "bob quit"]


@pytest.mark.parametrize("tool", list(SPECS))
async def test_no_tool_reaches_the_other_users_rows(deps, alice, bob, two, tool):
    """Every tool of the registry, called by Alice with its sample (tests.tool_samples)
    naming one of Bob's memories: Bob's rows stay as they were, nothing of his comes
    back, and his id answers as a missing one would."""
    bob_fp = await fingerprint(deps, bob)
    out = await _outcome(deps, alice, tool, sample_arguments(SPECS[tool], two["bob"][0]))
    assert await fingerprint(deps, bob) == bob_fp, tool
    shown = json.dumps(out, default=str)
    assert not [mark for mark in BOB_MARKS if mark in shown], (tool, out)
    if out[0] == "error":
        assert out[1] in ("NOT_FOUND", "INVALID_INPUT"), (tool, out)


async def test_reads_see_only_own_rows(deps, alice, bob, two):
    bob_fp = await fingerprint(deps, bob)
    own = {two["alice"]}
    for tool in ("recall", "search_memory"):
        for q in BOB_FACTS + ["bakery", "blood type"]:
            got = await call(deps, alice, tool, query=q, limit=50)
            assert {m["id"] for m in got["matches"]} <= own, (tool, q)
    prompt = await call(
        deps, alice, "build_context_prompt", user_prompt="where does my son live", limit=50
    )
    assert "Colby" not in prompt["prompt"]
    for args in ({}, {"include_deleted": True}, {"include_deleted": True, "limit": 50}):
        assert {
            m["id"] for m in (await call(deps, alice, "list_memories", **args))["memories"]
        } == own
    for fragment in ("Colby", "cat", "e", "bakery"):
        assert {
            m["id"] for m in (await call(deps, alice, "text_search", text=fragment))["memories"]
        } <= own
    assert (await call(deps, alice, "count_memories"))["count"] == 1
    assert (await call(deps, alice, "count_memories", include_deleted=True))["count"] == 1
    assert (await call(deps, alice, "count_memories", tags=["family"]))["count"] == 0
    assert (
        await call(deps, alice, "count_memories", source_provider="bobs-llm", include_deleted=True)
    )["count"] == 0
    stats = await call(deps, alice, "memory_stats")
    assert (stats["total"], stats["active"], stats["soft_deleted"], stats["expired"]) == (
        1,
        1,
        0,
        0,
    )
    assert stats["top_tags"] == [{"tag": "sport", "count": 1}]
    assert stats["by_provider"] == [{"provider": "(none)", "count": 1}]
    assert (await call(deps, alice, "list_tags", include_deleted=True))["tags"] == [
        {"tag": "sport", "count": 1}
    ]
    export = await call(deps, alice, "export_memories")
    assert [m["id"] for m in export["memories"]] == [two["alice"]] and export["count"] == 1
    # And Bob still sees all of his.
    assert (await call(deps, bob, "count_memories", include_deleted=True))["count"] == 6
    assert (await call(deps, bob, "export_memories"))["count"] == 6
    assert await fingerprint(deps, bob) == bob_fp


async def test_recall_finds_own_row_among_many_of_the_other_users(deps, alice, bob):
    # Filtered HNSW search: Bob's 120 near rows must not crowd out Alice's one.
    await remember_many(
        deps, bob, [f"My cat number {i} is called Whiskers {i}." for i in range(120)]
    )
    mine = (await call(deps, alice, "remember", text="My cat is called Whiskers."))["memory_id"]
    got = await call(deps, alice, "recall", query="what is my cat called")
    assert [m["id"] for m in got["matches"]] == [mine]
    got = await call(deps, alice, "recall", query="what is my cat called", tags=[])
    assert [m["id"] for m in got["matches"]] == [mine]


async def test_writes_do_not_dedup_against_the_other_user(deps, alice, bob, two):
    bob_fp = await fingerprint(deps, bob)
    # Exact duplicate of Bob's text: a new row for Alice.
    exact = await call(deps, alice, "remember", text=BOB_FACTS[0])
    assert exact["message"] == "Ok" and exact["memory_id"] not in two["bob"]
    # Near duplicate of Bob's text: not listed, not skipped.
    near = await call(
        deps, alice, "remember", text="I have a cat called Tom.", dedup_policy="skip_if_near"
    )
    assert near["message"] == "Ok" and near["memory_id"] not in two["bob"]
    near = await call(deps, alice, "remember", text="I'm allergic to peanuts")
    assert near["near_duplicates"] == []
    # Bob's tombstone is not Alice's correction.
    again = await call(deps, alice, "remember", text="I work at the bakery downtown.")
    assert not again.get("previously_corrected")
    batch = await call(
        deps,
        alice,
        "remember_batch",
        items=[{"text": BOB_FACTS[3]}, {"text": "I work at the bakery down town."}],
    )
    assert [r["message"] for r in batch["results"]] == ["Ok", "Ok"]
    assert not batch["results"][1].get("previously_corrected")
    assert await fingerprint(deps, bob) == bob_fp


async def test_supersedes_and_downweights_cannot_touch_the_other_user(deps, alice, bob, two):
    bob_fp = await fingerprint(deps, bob)
    targets = [*two["bob"], two["bob_kept"]]
    out = await call(
        deps,
        alice,
        "remember",
        text="My son moved to Denver.",
        supersedes=targets,
        downweights=targets,
    )
    assert out["ok"] is True
    assert not out.get("superseded") and not out.get("downweighted")
    assert sorted(out["skipped"]["supersedes"]) == sorted(targets)
    assert sorted(out["skipped"]["downweights"]) == sorted(targets)
    batch = await call(
        deps,
        alice,
        "remember_batch",
        items=[{"text": "Colby lives in Denver.", "supersedes": targets}],
    )
    assert batch["results"][0]["ok"] is True
    assert await fingerprint(deps, bob) == bob_fp


async def test_changes_to_the_other_users_rows_are_not_found(deps, alice, bob, two):
    bob_fp = await fingerprint(deps, bob)
    alice_fp = await fingerprint(deps, alice)
    for bob_id in [two["bob"][0], two["bob_kept"], two["bob_tomb"]]:
        for tool, args in [
            ("get_memory", {"id": bob_id}),
            ("update_memory", {"id": bob_id, "tags": ["hacked"]}),
            ("update_memory", {"id": bob_id, "text": "hacked text", "dry_run": True}),
            ("update_memory", {"id": bob_id, "keep": False}),
            ("confirm", {"id": bob_id}),
            ("forget", {"id": bob_id}),
            ("forget", {"id": bob_id, "hard_delete": True}),
            ("forget", {"id": bob_id, "dry_run": True}),
        ]:
            out = await _outcome(deps, alice, tool, args)
            assert out == ("error", "NOT_FOUND", f"Memory {bob_id} not found.", None), (
                tool,
                args,
                out,
            )
        ub = await call(
            deps, alice, "update_memory_batch", items=[{"id": bob_id, "importance": 0.1}]
        )
        assert ub["results"][0]["error"] == {
            "code": "NOT_FOUND",
            "message": f"Memory {bob_id} not found.",
        }
        fb = await call(deps, alice, "forget_batch", ids=[bob_id], reason="x")
        assert fb["results"][0]["error"] == {
            "code": "NOT_FOUND",
            "message": f"Memory {bob_id} not found.",
        }
    assert await fingerprint(deps, bob) == bob_fp
    assert await fingerprint(deps, alice) == alice_fp
    assert (await get(deps, bob, two["bob"][0]))["tags"] == ["family", "bobtag"]


async def test_forget_replaced_by_other_users_id_is_refused_like_a_missing_id(
    deps, alice, bob, two
):
    bob_id = two["bob"][1]
    alice_fp = await fingerprint(deps, alice)
    theirs = await _outcome(deps, alice, "forget", {"id": two["alice"], "replaced_by_id": bob_id})
    assert theirs[0] == "error" and theirs[1] == "INVALID_INPUT"
    await call(deps, bob, "forget", id=bob_id, hard_delete=True)
    missing = await _outcome(deps, alice, "forget", {"id": two["alice"], "replaced_by_id": bob_id})
    assert theirs == missing
    assert await fingerprint(deps, alice) == alice_fp


async def test_other_users_id_answers_exactly_like_a_missing_id(deps, alice, bob, two):
    """Same code, message and detail before and after the row stops existing."""
    bob_id = two["bob"][2]
    probes = [
        ("get_memory", {"id": bob_id}),
        ("update_memory", {"id": bob_id, "importance": 0.3}),
        ("update_memory", {"id": bob_id, "text": "New text entirely."}),
        ("confirm", {"id": bob_id}),
        ("forget", {"id": bob_id}),
        ("forget", {"id": bob_id, "hard_delete": True}),
        ("forget", {"id": bob_id, "dry_run": True}),
        ("update_memory_batch", {"items": [{"id": bob_id, "tags": ["a1"]}]}),
        ("forget_batch", {"ids": [bob_id]}),
        ("forget_batch", {"ids": [bob_id], "dry_run": True}),
        (
            "remember",
            {
                "text": "Unrelated fact about kites.",
                "supersedes": [bob_id],
                "dedup_policy": "insert",
            },
        ),
    ]
    while_bobs = [await _outcome(deps, alice, tool, args) for tool, args in probes]
    # Undo the one probe that writes (the remember), so both rounds start alike.
    kite = while_bobs[-1][1]["memory_id"]
    await call(deps, alice, "forget", id=kite, hard_delete=True)
    await call(deps, bob, "forget", id=bob_id, hard_delete=True)
    after_gone = [await _outcome(deps, alice, tool, args) for tool, args in probes]
    kite2 = after_gone[-1][1]["memory_id"]
    for (tool, _), a, b in zip(probes, while_bobs, after_gone, strict=True):
        if tool == "remember":
            a = {k: v for k, v in a[1].items() if k != "memory_id"}
            b = {k: v for k, v in b[1].items() if k != "memory_id"}
        assert a == b, tool
    assert kite2 != kite


async def test_tags_and_stats_of_the_other_user_unaffected_by_alice(deps, alice, bob, two):
    before = await call(deps, bob, "list_tags", include_deleted=True)
    await call(deps, alice, "remember", text="Alice likes chess.", tags=["family", "chess"])
    await call(deps, alice, "forget_batch", ids=[two["alice"]])
    assert await call(deps, bob, "list_tags", include_deleted=True) == before
    bob_stats = await call(deps, bob, "memory_stats")
    assert (bob_stats["total"], bob_stats["active"], bob_stats["soft_deleted"]) == (6, 5, 1)
