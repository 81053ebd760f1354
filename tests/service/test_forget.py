"""forget and forget_batch: soft/hard delete, tombstones, dry runs, keep lock, batch limits
(tools chapter "The forget tool", "The forget_batch tool"; SUPPLEMENT §3)."""

from __future__ import annotations

import pytest

from memory.errors import MemoryServiceError

from .helpers import call, fails, fingerprint, get, remember_many, row_count, sql

PEANUTS = "I am allergic to peanuts."
PEANUTS_2 = "I'm allergic to peanuts"


async def _mem(deps, user, text, **args):
    return (await call(deps, user, "remember", text=text, dedup_policy="insert", **args))[
        "memory_id"
    ]


# --- forget ------------------------------------------------------------------------------------


async def test_soft_forget_hides_the_row_but_keeps_a_tombstone(deps, alice):
    mid = await _mem(deps, alice, PEANUTS)
    other = await _mem(deps, alice, "I play tennis on weekends.")
    assert (await call(deps, alice, "count_memories"))["count"] == 2
    out = await call(deps, alice, "forget", id=mid, reason="tested negative")
    assert out["ok"] is True
    assert out["memory_id"] == mid
    assert out["dry_run"] is False
    assert out["already_deleted"] is False
    assert out["message"] == "Forgotten"

    assert [
        m["id"]
        for m in (await call(deps, alice, "recall", query="peanut allergy", limit=50))["matches"]
    ] == [other]
    assert [
        m["id"]
        for m in (await call(deps, alice, "search_memory", query="peanut allergy"))["matches"]
    ] == [other]
    assert [m["id"] for m in (await call(deps, alice, "list_memories"))["memories"]] == [other]
    assert (await call(deps, alice, "text_search", text="peanuts"))["memories"] == []
    assert (await call(deps, alice, "count_memories"))["count"] == 1
    prompt = (
        await call(deps, alice, "build_context_prompt", user_prompt="peanut allergy", min_score=0.5)
    )["prompt"]
    assert PEANUTS not in prompt

    row = await get(deps, alice, mid)
    assert row["deleted_at"] is not None
    assert row["forget_reason"] == "tested negative"
    assert row["replaced_by_id"] is None
    assert mid in [
        m["id"]
        for m in (await call(deps, alice, "list_memories", include_deleted=True))["memories"]
    ]
    assert mid in [m["id"] for m in (await call(deps, alice, "export_memories"))["memories"]]
    assert (await call(deps, alice, "count_memories", include_deleted=True))["count"] == 2


async def test_forget_with_replaced_by_id(deps, alice):
    old = await _mem(deps, alice, "My son lives in Boston.")
    new = await _mem(deps, alice, "My son lives in Los Angeles.")
    await call(deps, alice, "forget", id=old, replaced_by_id=new, reason="moved")
    row = await get(deps, alice, old)
    assert row["replaced_by_id"] == new and row["forget_reason"] == "moved"


async def test_forget_again_updates_the_tombstone(deps, alice):
    mid = await _mem(deps, alice, PEANUTS)
    await call(deps, alice, "forget", id=mid, reason="first reason")
    first = await get(deps, alice, mid)
    out = await call(deps, alice, "forget", id=mid, reason="second reason")
    assert out["already_deleted"] is True and out["dry_run"] is False
    row = await get(deps, alice, mid)
    assert row["forget_reason"] == "second reason"
    assert row["deleted_at"] == first["deleted_at"]  # still the original deletion time
    # Without a reason, the recorded reason stays.
    out = await call(deps, alice, "forget", id=mid)
    assert out["already_deleted"] is True
    assert (await get(deps, alice, mid))["forget_reason"] == "second reason"


async def test_forget_dry_run_changes_nothing(deps, alice):
    mid = await _mem(deps, alice, PEANUTS)
    gone = await _mem(deps, alice, "I had a goldfish named Bubbles.")
    await call(deps, alice, "forget", id=gone, reason="it died")
    before = await fingerprint(deps, alice)

    soft = await call(deps, alice, "forget", id=mid, dry_run=True, reason="x")
    assert soft["ok"] is True and soft["memory_id"] == mid and soft["dry_run"] is True
    assert soft["already_deleted"] is False and soft["message"] == "Would soft-delete"
    hard = await call(deps, alice, "forget", id=mid, dry_run=True, hard_delete=True)
    assert (
        hard["message"] == "Would hard-delete"
        and hard["dry_run"] is True
        and hard["already_deleted"] is False
    )
    again = await call(deps, alice, "forget", id=gone, dry_run=True, reason="new reason")
    assert again["message"] == "Would update tombstone (already soft-deleted)"
    assert again["already_deleted"] is True
    hard_gone = await call(deps, alice, "forget", id=gone, dry_run=True, hard_delete=True)
    assert hard_gone["message"] == "Would hard-delete" and hard_gone["already_deleted"] is True

    assert await fingerprint(deps, alice) == before
    assert (await get(deps, alice, mid))["deleted_at"] is None
    assert (await get(deps, alice, gone))["forget_reason"] == "it died"


async def test_hard_delete_removes_everything(deps, alice):
    mid = await _mem(deps, alice, PEANUTS)
    keep = await _mem(deps, alice, "I play tennis on weekends.")
    out = await call(deps, alice, "forget", id=mid, hard_delete=True)
    assert out["ok"] is True and out["memory_id"] == mid and out["dry_run"] is False
    assert out["already_deleted"] is False
    assert await row_count(deps, alice) == 1
    await fails(deps, alice, "get_memory", "NOT_FOUND", id=mid)
    assert [m["id"] for m in (await call(deps, alice, "export_memories"))["memories"]] == [keep]
    assert mid not in [
        m["id"]
        for m in (await call(deps, alice, "list_memories", include_deleted=True))["memories"]
    ]
    assert (await call(deps, alice, "count_memories", include_deleted=True))["count"] == 1
    # Not a tombstone either: a near-identical memory is not "previously corrected".
    again = await call(deps, alice, "remember", text=PEANUTS_2)
    assert not again.get("previously_corrected")
    assert again["memory_id"] != mid  # ids are never reused
    # Forgetting it again: it does not exist any more.
    await fails(deps, alice, "forget", "NOT_FOUND", id=mid)


async def test_hard_delete_of_a_tombstone_erases_it(deps, alice):
    mid = await _mem(deps, alice, PEANUTS)
    await call(deps, alice, "forget", id=mid, reason="wrong")
    assert (await call(deps, alice, "remember", text=PEANUTS_2, dedup_policy="insert"))[
        "previously_corrected"
    ]
    await call(
        deps,
        alice,
        "forget",
        id=(await call(deps, alice, "text_search", text="I'm allergic"))["memories"][0]["id"],
        hard_delete=True,
    )
    out = await call(deps, alice, "forget", id=mid, hard_delete=True)
    assert out["already_deleted"] is True
    await fails(deps, alice, "get_memory", "NOT_FOUND", id=mid)
    assert (await call(deps, alice, "export_memories"))["memories"] == []
    again = await call(deps, alice, "remember", text=PEANUTS_2)
    assert not again.get("previously_corrected")


async def test_hard_delete_with_reason_or_replacement_is_refused(deps, alice):
    mid = await _mem(deps, alice, PEANUTS)
    other = await _mem(deps, alice, "I play tennis on weekends.")
    before = await fingerprint(deps, alice)
    await fails(deps, alice, "forget", "INVALID_INPUT", id=mid, hard_delete=True, reason="because")
    await fails(
        deps, alice, "forget", "INVALID_INPUT", id=mid, hard_delete=True, replaced_by_id=other
    )
    assert await fingerprint(deps, alice) == before


async def test_forget_not_found(deps, alice):
    err = await fails(deps, alice, "forget", "NOT_FOUND", id=999999)
    assert err.message == "Memory 999999 not found."
    await fails(deps, alice, "forget", "NOT_FOUND", id=999999, hard_delete=True)
    await fails(deps, alice, "forget", "NOT_FOUND", id=999999, dry_run=True)


@pytest.mark.parametrize(
    "extra",
    [
        {"reason": 5},
        {"reason": ["a"]},
        {"hard_delete": "true"},
        {"hard_delete": 1},
        {"dry_run": "false"},
        {"replaced_by_id": "2"},
        {"replaced_by_id": 0},
        {"replaced_by_id": True},
        {"reason": "x" * 5000},
        {"replaced_by_id": "self"},
    ],
)
async def test_forget_invalid_input_changes_nothing(deps, alice, extra):
    mid = await _mem(deps, alice, PEANUTS)
    if extra.get("replaced_by_id") == "self":
        extra = {"replaced_by_id": mid}
    before = await fingerprint(deps, alice)
    await fails(deps, alice, "forget", "INVALID_INPUT", id=mid, **extra)
    assert await fingerprint(deps, alice) == before


@pytest.mark.parametrize("bad_id", [None, "1", True, 0, -1, 1.5, [1]])
async def test_forget_invalid_id(deps, alice, bad_id):
    await _mem(deps, alice, PEANUTS)
    before = await fingerprint(deps, alice)
    await fails(deps, alice, "forget", "INVALID_INPUT", id=bad_id)
    assert await fingerprint(deps, alice) == before


@pytest.mark.parametrize("args", [{}, {"hard_delete": True}, {"dry_run": True}, {"reason": "r"}])
async def test_locked_row_cannot_be_forgotten(deps, alice, args):
    mid = await _mem(deps, alice, PEANUTS, keep=True)
    before = await fingerprint(deps, alice)
    err = await fails(deps, alice, "forget", "INVALID_INPUT", id=mid, **args)
    assert err.detail["reason"] == "locked"
    assert await fingerprint(deps, alice) == before
    assert (await get(deps, alice, mid))["deleted_at"] is None


# --- forget_batch ------------------------------------------------------------------------------------


async def test_forget_batch_results_and_summary(deps, alice):
    a, b, c = await remember_many(
        deps,
        alice,
        ["Fact alpha about boats.", "Fact beta about trains.", "Fact gamma about planes."],
    )
    kept = await _mem(deps, alice, "My blood type is O negative.", keep=True)
    await call(deps, alice, "forget", id=c, reason="old reason")
    out = await call(
        deps, alice, "forget_batch", ids=[a, 999999, c, kept, b, "x"], reason="cleanup"
    )
    assert out["ok"] is True and out["dry_run"] is False
    r = out["results"]
    assert [x["input_index"] for x in r] == list(range(6))
    assert r[0] == {
        "input_index": 0,
        "id": a,
        "ok": True,
        "already_deleted": False,
        "message": "Forgotten",
    }
    assert r[1] == {
        "input_index": 1,
        "id": 999999,
        "ok": False,
        "error": {"code": "NOT_FOUND", "message": "Memory 999999 not found."},
    }
    assert r[2]["ok"] is True and r[2]["id"] == c and r[2]["already_deleted"] is True
    assert r[3]["ok"] is False and r[3]["id"] == kept
    assert (
        r[3]["error"]["code"] == "INVALID_INPUT" and r[3]["error"]["detail"]["reason"] == "locked"
    )
    assert r[4]["ok"] is True and r[4]["id"] == b and r[4]["already_deleted"] is False
    assert r[5]["ok"] is False and r[5]["error"]["code"] == "INVALID_INPUT"
    assert out["summary"] == {"total": 6, "deleted": 2, "already_deleted": 1, "errors": 3}

    for mid in (a, b, c):
        row = await get(deps, alice, mid)
        assert row["deleted_at"] is not None and row["forget_reason"] == "cleanup"
    assert (await get(deps, alice, kept))["deleted_at"] is None
    assert [m["id"] for m in (await call(deps, alice, "list_memories"))["memories"]] == [kept]
    recalled = await call(deps, alice, "recall", query="boats trains planes", limit=50)
    assert [m["id"] for m in recalled["matches"]] == [kept]


async def test_forget_batch_without_reason_keeps_existing_tombstone_reason(deps, alice):
    a, b = await remember_many(deps, alice, ["Fact alpha about boats.", "Fact beta about trains."])
    await call(deps, alice, "forget", id=a, reason="kept reason")
    out = await call(deps, alice, "forget_batch", ids=[a, b])
    assert [x["already_deleted"] for x in out["results"]] == [True, False]
    assert (await get(deps, alice, a))["forget_reason"] == "kept reason"
    assert (await get(deps, alice, b))["deleted_at"] is not None


async def test_forget_batch_duplicate_ids(deps, alice):
    [a] = await remember_many(deps, alice, ["Fact alpha about boats."])
    out = await call(deps, alice, "forget_batch", ids=[a, a])
    assert [x["ok"] for x in out["results"]] == [True, True]
    assert out["results"][0]["already_deleted"] is False
    assert out["summary"]["total"] == 2 and out["summary"]["errors"] == 0
    assert out["summary"]["deleted"] + out["summary"]["already_deleted"] == 2
    assert (await get(deps, alice, a))["deleted_at"] is not None


async def test_forget_batch_dry_run_changes_nothing(deps, alice):
    a, b = await remember_many(deps, alice, ["Fact alpha about boats.", "Fact beta about trains."])
    await call(deps, alice, "forget", id=b)
    before = await fingerprint(deps, alice)
    out = await call(deps, alice, "forget_batch", ids=[a, b, 999999], dry_run=True, reason="r")
    assert out["dry_run"] is True
    r = out["results"]
    assert (
        r[0]["ok"] is True
        and r[0]["already_deleted"] is False
        and r[0]["message"] == "Would soft-delete"
    )
    assert r[1]["ok"] is True and r[1]["already_deleted"] is True
    assert r[1]["message"] == "Would update tombstone (already soft-deleted)"
    assert r[2]["error"]["code"] == "NOT_FOUND"
    assert out["summary"] == {"total": 3, "deleted": 1, "already_deleted": 1, "errors": 1}
    assert await fingerprint(deps, alice) == before


async def test_forget_batch_over_limit(deps, alice):
    ids = await remember_many(deps, alice, ["Fact alpha about boats."])
    before = await fingerprint(deps, alice)
    n = deps.settings.max_batch_size
    err = await fails(deps, alice, "forget_batch", "LIMIT_EXCEEDED", ids=ids * (n + 1))
    assert str(n) in err.message
    assert await fingerprint(deps, alice) == before
    out = await call(deps, alice, "forget_batch", ids=ids + list(range(10**6, 10**6 + n - 1)))
    assert out["summary"] == {"total": n, "deleted": 1, "already_deleted": 0, "errors": n - 1}


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"ids": None},
        {"ids": []},
        {"ids": 5},
        {"ids": "1,2"},
        {"ids": {"a": 1}},
        {"ids": [1], "reason": 7},
        {"ids": [1], "reason": "x" * 5000},
        {"ids": [1], "dry_run": "yes"},
    ],
)
async def test_forget_batch_invalid_input(deps, alice, args):
    await remember_many(deps, alice, ["Fact alpha about boats."])
    before = await fingerprint(deps, alice)
    await fails(deps, alice, "forget_batch", "INVALID_INPUT", **args)
    assert await fingerprint(deps, alice) == before


async def test_forget_batch_has_no_hard_delete(deps, alice):
    [a] = await remember_many(deps, alice, ["Fact alpha about boats."])
    try:
        await call(deps, alice, "forget_batch", ids=[a], hard_delete=True)
    except MemoryServiceError as ex:  # refusing the argument is fine too
        assert ex.code == "INVALID_INPUT"
    # Soft-delete only by design: whatever happened, the row still exists.
    assert await row_count(deps, alice) == 1
    rows = await sql(deps, "SELECT count(*) FROM memories WHERE id = %s", (a,))
    assert rows[0][0] == 1
