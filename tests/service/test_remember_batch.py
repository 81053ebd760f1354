"""remember_batch: per-item outcomes in input order, summary, defaults, in-batch dedup,
MAX_BATCH_SIZE (tools chapter "The remember_batch tool"; SUPPLEMENT §3)."""

from __future__ import annotations

import pytest

from memory.deps import Deps

from .helpers import call, fails, fingerprint, get, row_count

BLUE = "My favourite colour is blue."
BLUE_US = "My favorite color is blue."
SECRET = "ghp_" + "a1B2c3D4e5" * 4


async def test_results_in_input_order_with_summary(deps, alice):
    texts = ["I have a cat named Tom.", "I play tennis on weekends.", "I love eating sushi."]
    out = await call(deps, alice, "remember_batch", items=[{"text": t} for t in texts])
    assert out["ok"] is True
    assert out["summary"] == {"total": 3, "succeeded": 3, "failed": 0}
    assert len(out["results"]) == 3
    for text, result in zip(texts, out["results"], strict=True):
        assert result["ok"] is True
        assert isinstance(result["memory_id"], int)
        assert result["message"] == "Ok"
        assert (await get(deps, alice, result["memory_id"]))["text"] == text
    assert len({r["memory_id"] for r in out["results"]}) == 3
    assert await row_count(deps, alice) == 3


async def test_per_item_failures_do_not_fail_the_batch(deps, alice):
    items = [
        {"text": "I have a cat named Tom."},
        {"text": f"my token is {SECRET}"},
        {"text": "   "},
        "not an object",
        {"text": "I love eating sushi.", "tags": "not-a-list"},
        {"text": "I play tennis on weekends.", "importance": 7},
        {"tags": ["family"]},
        {"text": "I enjoy pizza on Fridays.", "capture_mode": "guessed"},
        {"text": "I work as a software engineer."},
    ]
    out = await call(deps, alice, "remember_batch", items=items)
    results = out["results"]
    assert len(results) == len(items)
    codes = [r["error"]["code"] if not r["ok"] else None for r in results]
    assert codes == [
        None,
        "SECRET_REJECTED",
        "INVALID_INPUT",
        "INVALID_INPUT",
        "INVALID_INPUT",
        "INVALID_INPUT",
        "INVALID_INPUT",
        "INVALID_INPUT",
        None,
    ]
    for r in results:
        if not r["ok"]:
            assert set(r["error"]) >= {"code", "message"} and r["error"]["message"]
            assert "memory_id" not in r
    assert SECRET not in str(results[1])
    assert out["summary"] == {"total": 9, "succeeded": 2, "failed": 7}
    assert await row_count(deps, alice) == 2
    stored = {(await get(deps, alice, r["memory_id"]))["text"] for r in results if r["ok"]}
    assert stored == {"I have a cat named Tom.", "I work as a software engineer."}


async def test_batch_of_only_bad_items_stores_nothing(deps, alice):
    out = await call(deps, alice, "remember_batch", items=[{"text": ""}, {"text": SECRET}, 5])
    assert out["ok"] is True
    assert out["summary"] == {"total": 3, "succeeded": 0, "failed": 3}
    assert await row_count(deps) == 0


async def test_default_source_provider_and_item_override(deps, alice):
    out = await call(
        deps,
        alice,
        "remember_batch",
        source_provider="claude",
        items=[
            {"text": "I have a cat named Tom."},
            {"text": "I love eating sushi.", "source_provider": "openai"},
        ],
    )
    a = await get(deps, alice, out["results"][0]["memory_id"])
    b = await get(deps, alice, out["results"][1]["memory_id"])
    assert a["source_provider"] == "claude"
    assert b["source_provider"] == "openai"


async def test_default_dedup_policy_and_item_override(deps, alice):
    first = await call(deps, alice, "remember", text=BLUE)
    out = await call(
        deps,
        alice,
        "remember_batch",
        dedup_policy="skip_if_near",
        items=[
            {"text": BLUE_US},
            {"text": "My favourite colour is blue!", "dedup_policy": "insert"},
        ],
    )
    skipped, inserted = out["results"]
    assert skipped["memory_id"] == first["memory_id"] and skipped["message"] == "Already remembered"
    assert inserted["message"] == "Ok" and inserted["memory_id"] != first["memory_id"]
    assert not inserted.get("near_duplicates")
    assert await row_count(deps, alice) == 2


async def test_default_policy_is_ask(deps, alice):
    first = await call(deps, alice, "remember", text=BLUE)
    out = await call(deps, alice, "remember_batch", items=[{"text": BLUE_US}])
    [r] = out["results"]
    assert r["message"] == "Ok" and r["memory_id"] != first["memory_id"]
    assert [n["id"] for n in r["near_duplicates"]] == [first["memory_id"]]


async def test_exact_duplicates_within_and_against_the_store(deps, alice):
    existing = await call(deps, alice, "remember", text="I play tennis on weekends.")
    out = await call(
        deps,
        alice,
        "remember_batch",
        dedup_policy="insert",
        items=[
            {"text": "I have a cat named Tom."},
            {"text": "  i HAVE a cat named tom.  "},
            {"text": "I PLAY tennis on weekends."},
        ],
    )
    r0, r1, r2 = out["results"]
    assert r0["message"] == "Ok"
    assert r1["memory_id"] == r0["memory_id"] and r1["message"] == "Already remembered"
    assert r2["memory_id"] == existing["memory_id"] and r2["message"] == "Already remembered"
    assert out["summary"] == {"total": 3, "succeeded": 3, "failed": 0}
    assert await row_count(deps, alice) == 2


async def test_near_duplicates_within_the_batch(deps, alice):
    ask = await call(deps, alice, "remember_batch", items=[{"text": BLUE}, {"text": BLUE_US}])
    a, b = ask["results"]
    assert a["message"] == b["message"] == "Ok" and a["memory_id"] != b["memory_id"]
    assert [n["id"] for n in b["near_duplicates"]] == [a["memory_id"]]
    assert b["near_duplicates"][0]["score"] >= 0.90

    skip = await call(
        deps,
        alice,
        "remember_batch",
        dedup_policy="skip_if_near",
        items=[{"text": "I am allergic to peanuts."}, {"text": "I'm allergic to peanuts"}],
    )
    c, d = skip["results"]
    assert c["message"] == "Ok"
    assert d["memory_id"] == c["memory_id"] and d["message"] == "Already remembered"
    assert await row_count(deps, alice) == 3


async def test_tombstones_reported_per_item(deps, alice):
    old = await call(deps, alice, "remember", text="I am allergic to peanuts.")
    await call(deps, alice, "forget", id=old["memory_id"], reason="wrong")
    out = await call(
        deps,
        alice,
        "remember_batch",
        items=[{"text": "I play tennis on weekends."}, {"text": "I'm allergic to peanuts"}],
    )
    first, second = out["results"]
    assert not first.get("previously_corrected")
    [pc] = second["previously_corrected"]
    assert pc["id"] == old["memory_id"] and pc["forget_reason"] == "wrong"
    assert set(pc) >= {"id", "text", "score", "forget_reason", "replaced_by_id", "deleted_at"}


async def test_supersedes_and_downweights_per_item(deps, alice):
    old = await call(deps, alice, "remember", text="My son Colby lives in Boston.")
    stale = await call(deps, alice, "remember", text="I drink three coffees a day.")
    out = await call(
        deps,
        alice,
        "remember_batch",
        items=[
            {"text": "My son Colby moved to Los Angeles.", "supersedes": [old["memory_id"], 77777]},
            {"text": "I have cut down to one coffee a day.", "downweights": [stale["memory_id"]]},
        ],
    )
    a, b = out["results"]
    assert a["superseded"] == [old["memory_id"]] and a["skipped"]["supersedes"] == [77777]
    tomb = await get(deps, alice, old["memory_id"])
    assert tomb["forget_reason"] == f"superseded by #{a['memory_id']}"
    assert tomb["replaced_by_id"] == a["memory_id"]
    assert b["downweighted"] == [stale["memory_id"]]
    row = await get(deps, alice, stale["memory_id"])
    assert row["salience"] < 0 and row["deleted_at"] is None


async def test_locked_supersedes_fails_only_that_item(deps, alice):
    kept = await call(deps, alice, "remember", text="My blood type is O negative.", keep=True)
    out = await call(
        deps,
        alice,
        "remember_batch",
        items=[
            {"text": "My blood type is A positive.", "supersedes": [kept["memory_id"]]},
            {"text": "I play tennis on weekends."},
        ],
    )
    bad, good = out["results"]
    assert bad["ok"] is False and bad["error"]["code"] == "INVALID_INPUT"
    assert bad["error"]["detail"]["reason"] == "locked"
    assert good["ok"] is True
    assert out["summary"] == {"total": 2, "succeeded": 1, "failed": 1}
    assert (await get(deps, alice, kept["memory_id"]))["deleted_at"] is None
    assert (await call(deps, alice, "text_search", text="A positive"))["memories"] == []


async def test_tags_normalized_per_item(deps, alice):
    out = await call(
        deps,
        alice,
        "remember_batch",
        items=[{"text": "I have a cat named Tom.", "tags": ["Pets", "FAM"]}],
    )
    row = await get(deps, alice, out["results"][0]["memory_id"])
    assert sorted(row["tags"]) == ["family", "pets"]


async def test_over_max_batch_size_is_invalid_input_and_stores_nothing(deps, alice):
    n = deps.settings.max_batch_size + 1
    await fails(
        deps,
        alice,
        "remember_batch",
        "INVALID_INPUT",
        items=[{"text": f"fact {i}"} for i in range(n)],
    )
    assert await row_count(deps) == 0


async def test_exactly_max_batch_size_is_accepted(deps, alice):
    n = deps.settings.max_batch_size
    out = await call(
        deps,
        alice,
        "remember_batch",
        dedup_policy="insert",
        items=[{"text": f"Numbered fact {i}."} for i in range(n)],
    )
    assert out["summary"] == {"total": n, "succeeded": n, "failed": 0}
    assert await row_count(deps, alice) == n


async def test_batch_size_limit_follows_settings(deps, alice, settings):
    small = Deps(
        settings=settings.with_overrides(max_batch_size=2), pool=deps.pool, embedder=deps.embedder
    )
    await fails(
        small,
        alice,
        "remember_batch",
        "INVALID_INPUT",
        items=[{"text": "a b"}, {"text": "c d"}, {"text": "e f"}],
    )
    out = await call(small, alice, "remember_batch", items=[{"text": "a b"}, {"text": "c d"}])
    assert out["summary"]["succeeded"] == 2


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"items": None},
        {"items": []},
        {"items": {"text": "not an array"}},
        {"items": "I have a cat."},
        {"items": [{"text": "x y"}], "dedup_policy": "sometimes"},
        {"items": [{"text": "x y"}], "source_provider": 12},
    ],
)
async def test_batch_level_invalid_input(deps, alice, args):
    before = await fingerprint(deps, alice)
    await fails(deps, alice, "remember_batch", "INVALID_INPUT", **args)
    assert await fingerprint(deps, alice) == before
