"""update_memory, update_memory_batch, confirm (tools chapter; SUPPLEMENT §3-4)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory.errors import MemoryServiceError

from .helpers import call, fails, fingerprint, get, sql

OLD = "My son Colby lives in Boston."
NEW = "My son Colby moved to Los Angeles in 2024."
SECRET = "sk-" + "A1b2C3d4" * 4


def _parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


async def _mem(deps, user, text, **args):
    return (await call(deps, user, "remember", text=text, dedup_policy="insert", **args))[
        "memory_id"
    ]


async def _backdate(deps, memory_id):
    """Push updated_at into the past so a later change is visible."""
    await sql(
        deps,
        "UPDATE memories SET updated_at = now() - interval '1 hour' WHERE id = %s",
        (memory_id,),
    )


# --- update_memory -------------------------------------------------------------------------


async def test_update_text_regenerates_embedding(deps, alice):
    mid = await _mem(deps, alice, OLD)
    await _mem(deps, alice, "I enjoy pizza on Fridays.")
    await _backdate(deps, mid)
    before = await get(deps, alice, mid)
    out = await call(deps, alice, "update_memory", id=mid, text=NEW)
    assert out == {
        "ok": True,
        "memory_id": mid,
        "dry_run": False,
        "changed_fields": ["text"],
        "message": "Ok",
    }
    row = await get(deps, alice, mid)
    assert row["text"] == NEW
    assert _parse(row["updated_at"]) > _parse(before["updated_at"])
    assert row["created_at"] == before["created_at"]
    # Recall finds the new text, with the new text's similarity.
    got = await call(deps, alice, "recall", query="Colby moved to Los Angeles", limit=1)
    assert got["matches"][0]["id"] == mid and got["matches"][0]["text"] == NEW
    assert got["matches"][0]["score"] > 0.8
    # Text search sees the new text only.
    assert (await call(deps, alice, "text_search", text="Boston"))["memories"] == []
    assert [
        m["id"] for m in (await call(deps, alice, "text_search", text="moved to Los"))["memories"]
    ] == [mid]
    # The exact-duplicate key follows the text.
    again = await call(deps, alice, "remember", text=NEW.upper())
    assert again["memory_id"] == mid and again["message"] == "Already remembered"
    old_again = await call(deps, alice, "remember", text=OLD, dedup_policy="insert")
    assert old_again["memory_id"] != mid and old_again["message"] == "Ok"


async def test_update_metadata_leaves_text_and_embedding_alone(deps, alice):
    mid = await _mem(deps, alice, OLD, tags=["family"])
    score_before = (await call(deps, alice, "recall", query="where does Colby live"))["matches"][0][
        "score"
    ]
    emb_before = await sql(
        deps, "SELECT md5(embedding::text), embedding_model FROM memories WHERE id = %s", (mid,)
    )
    out = await call(
        deps,
        alice,
        "update_memory",
        id=mid,
        importance=0.9,
        tags=["Fam", "Travel"],
        expires_at="2099-01-01T00:00:00Z",
        last_confirmed_at="2023-06-01T12:00:00+02:00",
    )
    assert out["changed_fields"] == ["tags", "importance", "expires_at", "last_confirmed_at"]
    assert out["message"] == "Ok" and out["dry_run"] is False
    row = await get(deps, alice, mid)
    assert row["text"] == OLD
    assert sorted(row["tags"]) == ["family", "travel"]
    assert row["importance"] == pytest.approx(0.9)
    assert row["expires_at"] == "2099-01-01T00:00:00Z"
    assert row["last_confirmed_at"] == "2023-06-01T10:00:00Z"
    assert (
        await sql(
            deps, "SELECT md5(embedding::text), embedding_model FROM memories WHERE id = %s", (mid,)
        )
        == emb_before
    )
    score_after = (await call(deps, alice, "recall", query="where does Colby live"))["matches"][0][
        "score"
    ]
    assert score_after == score_before


async def test_update_only_the_fields_given(deps, alice):
    mid = await _mem(deps, alice, OLD, tags=["family"], importance=0.3, source_provider="openai")
    before = await get(deps, alice, mid)
    out = await call(deps, alice, "update_memory", id=mid, importance=0.6)
    assert out["changed_fields"] == ["importance"]
    after = await get(deps, alice, mid)
    for field in (
        "text",
        "tags",
        "expires_at",
        "last_confirmed_at",
        "source_provider",
        "created_at",
        "keep",
    ):
        assert after[field] == before[field], field
    assert after["importance"] == pytest.approx(0.6)


async def test_update_clears_expiry_with_null(deps, alice):
    mid = await _mem(deps, alice, OLD, expires_at="2099-01-01T00:00:00Z")
    out = await call(deps, alice, "update_memory", id=mid, expires_at=None)
    assert out["changed_fields"] == ["expires_at"]
    assert (await get(deps, alice, mid))["expires_at"] is None


async def test_update_dry_run_changes_nothing(deps, alice):
    mid = await _mem(deps, alice, OLD, tags=["family"])
    before = await fingerprint(deps, alice)
    out = await call(
        deps, alice, "update_memory", id=mid, text=NEW, tags=["work"], importance=0.1, dry_run=True
    )
    assert out == {
        "ok": True,
        "memory_id": mid,
        "dry_run": True,
        "changed_fields": ["text", "tags", "importance"],
        "message": "Would update",
    }
    assert await fingerprint(deps, alice) == before
    assert (await get(deps, alice, mid))["text"] == OLD


async def test_update_secret_rejected_and_unchanged(deps, alice):
    mid = await _mem(deps, alice, OLD)
    before = await fingerprint(deps, alice)
    err = await fails(
        deps, alice, "update_memory", "SECRET_REJECTED", id=mid, text=f"my key is {SECRET}"
    )
    assert SECRET not in err.message
    assert await fingerprint(deps, alice) == before


async def test_update_not_found(deps, alice):
    err = await fails(deps, alice, "update_memory", "NOT_FOUND", id=999999, tags=["x1"])
    assert err.message == "Memory 999999 not found."


async def test_update_soft_deleted_is_not_found(deps, alice):
    mid = await _mem(deps, alice, OLD)
    await call(deps, alice, "forget", id=mid)
    before = await fingerprint(deps, alice)
    err = await fails(deps, alice, "update_memory", "NOT_FOUND", id=mid, text=NEW)
    assert err.message == f"Memory {mid} not found."
    assert await fingerprint(deps, alice) == before


async def test_update_to_another_rows_text_is_refused(deps, alice):
    a = await _mem(deps, alice, OLD)
    b = await _mem(deps, alice, NEW)
    before = await fingerprint(deps, alice)
    await fails(deps, alice, "update_memory", "INVALID_INPUT", id=b, text=OLD.lower())
    assert await fingerprint(deps, alice) == before
    # Changing only the case of a row's own text is fine.
    out = await call(deps, alice, "update_memory", id=a, text=OLD.upper())
    assert out["changed_fields"] == ["text"]


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"dry_run": True},
        {"importance": 1.5},
        {"importance": -0.1},
        {"importance": None},
        {"importance": "high"},
        {"text": ""},
        {"text": 12},
        {"tags": "family"},
        {"tags": [None]},
        {"expires_at": "tomorrow"},
        {"expires_at": "2000-01-01T00:00:00Z"},
        {"last_confirmed_at": "2024-01-01"},
        {"last_confirmed_at": None},
        {"keep": "yes"},
        {"dry_run": "no", "importance": 0.2},
    ],
)
async def test_update_invalid_input_changes_nothing(deps, alice, extra):
    mid = await _mem(deps, alice, OLD)
    before = await fingerprint(deps, alice)
    await fails(deps, alice, "update_memory", "INVALID_INPUT", id=mid, **extra)
    assert await fingerprint(deps, alice) == before


@pytest.mark.parametrize("bad_id", [None, "1", True, 0, -1, 1.5, [1], {"id": 1}])
async def test_update_invalid_id(deps, alice, bad_id):
    await fails(deps, alice, "update_memory", "INVALID_INPUT", id=bad_id, importance=0.5)


# --- keep lock ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"text": NEW},
        {"tags": ["work"]},
        {"importance": 0.1},
        {"expires_at": "2099-01-01T00:00:00Z"},
        {"last_confirmed_at": "2024-01-01T00:00:00Z"},
        {"keep": False, "tags": ["work"]},
        {"keep": True},
        {"text": NEW, "dry_run": True},
    ],
)
async def test_locked_row_refuses_updates(deps, alice, change):
    mid = await _mem(deps, alice, OLD, keep=True)
    before = await fingerprint(deps, alice)
    err = await fails(deps, alice, "update_memory", "INVALID_INPUT", id=mid, **change)
    assert err.detail["reason"] == "locked"
    assert await fingerprint(deps, alice) == before


async def test_keep_false_alone_unlocks(deps, alice):
    mid = await _mem(deps, alice, OLD, keep=True)
    out = await call(deps, alice, "update_memory", id=mid, keep=False)
    assert out["ok"] is True and out["changed_fields"] == ["keep"]
    assert (await get(deps, alice, mid))["keep"] is False
    out = await call(deps, alice, "update_memory", id=mid, text=NEW)
    assert (await get(deps, alice, mid))["text"] == NEW
    await call(deps, alice, "forget", id=mid)
    assert (await get(deps, alice, mid))["deleted_at"] is not None


async def test_keep_null_does_not_unlock(deps, alice):
    # Only "keep: false and nothing else" unlocks (SUPPLEMENT §3); JSON null is not false.
    mid = await _mem(deps, alice, OLD, keep=True)
    try:
        await call(deps, alice, "update_memory", id=mid, keep=None)
    except MemoryServiceError as ex:
        assert ex.code == "INVALID_INPUT"
    assert (await get(deps, alice, mid))["keep"] is True, "keep: null unlocked a kept row"


async def test_keep_true_locks_an_existing_row(deps, alice):
    mid = await _mem(deps, alice, OLD)
    out = await call(deps, alice, "update_memory", id=mid, keep=True)
    assert out["changed_fields"] == ["keep"]
    err = await fails(deps, alice, "update_memory", "INVALID_INPUT", id=mid, importance=0.2)
    assert err.detail["reason"] == "locked"
    err = await fails(deps, alice, "forget", "INVALID_INPUT", id=mid)
    assert err.detail["reason"] == "locked"


# --- update_memory_batch ---------------------------------------------------------------------------


async def test_batch_results_in_order_with_per_item_errors(deps, alice):
    a = await _mem(deps, alice, OLD)
    b = await _mem(deps, alice, "I have a cat named Tom.")
    kept = await _mem(deps, alice, "My blood type is O negative.", keep=True)
    gone = await _mem(deps, alice, "I had a goldfish.")
    await call(deps, alice, "forget", id=gone)
    out = await call(
        deps,
        alice,
        "update_memory_batch",
        items=[
            {"id": a, "text": NEW},
            {"id": None, "tags": ["x1"]},
            {"id": 42424242, "tags": ["x1"]},
            {"id": b, "tags": ["pets"], "importance": 0.9},
            {"id": b, "text": f"token {SECRET}"},
            {"id": kept, "importance": 0.1},
            {"id": gone, "importance": 0.1},
            {"id": a},
        ],
    )
    assert out["ok"] is True and out["dry_run"] is False
    results = out["results"]
    assert [r["input_index"] for r in results] == list(range(8))
    assert [r["ok"] for r in results] == [True, False, False, True, False, False, False, False]
    assert results[0] == {
        "input_index": 0,
        "id": a,
        "ok": True,
        "changed_fields": ["text"],
        "message": "Ok",
    }
    assert results[3]["changed_fields"] == ["tags", "importance"] and results[3]["id"] == b
    assert results[1]["error"]["code"] == "INVALID_INPUT"
    assert results[2]["id"] == 42424242
    assert results[2]["error"] == {"code": "NOT_FOUND", "message": "Memory 42424242 not found."}
    assert results[4]["error"]["code"] == "SECRET_REJECTED" and SECRET not in str(results[4])
    assert (
        results[5]["error"]["code"] == "INVALID_INPUT"
        and results[5]["error"]["detail"]["reason"] == "locked"
    )
    assert results[6]["error"] == {"code": "NOT_FOUND", "message": f"Memory {gone} not found."}
    assert results[7]["error"]["code"] == "INVALID_INPUT"
    assert out["summary"] == {"total": 8, "updated": 2, "errors": 6}
    # The successful items were applied, the failed ones changed nothing.
    assert (await get(deps, alice, a))["text"] == NEW
    row_b = await get(deps, alice, b)
    assert row_b["text"] == "I have a cat named Tom." and row_b["tags"] == ["pets"]
    assert (await get(deps, alice, kept))["importance"] == pytest.approx(0.5)
    got = await call(deps, alice, "recall", query="Colby moved to Los Angeles", limit=1)
    assert got["matches"][0]["id"] == a


async def test_batch_text_updates_are_recallable(deps, alice):
    a = await _mem(deps, alice, "I have a cat named Tom.")
    b = await _mem(deps, alice, "I have a dog named Rex.")
    await call(
        deps,
        alice,
        "update_memory_batch",
        items=[
            {"id": a, "text": "I have a parrot named Polly."},
            {"id": b, "text": "I keep bees in the garden."},
        ],
    )
    assert (await call(deps, alice, "recall", query="parrot", limit=1))["matches"][0]["id"] == a
    assert (await call(deps, alice, "recall", query="beekeeping", limit=1))["matches"][0]["id"] == b


async def test_batch_dry_run_changes_nothing(deps, alice):
    a = await _mem(deps, alice, OLD)
    before = await fingerprint(deps, alice)
    out = await call(
        deps,
        alice,
        "update_memory_batch",
        dry_run=True,
        items=[{"id": a, "text": NEW, "tags": ["family"]}, {"id": 999999, "importance": 0.2}],
    )
    assert out["dry_run"] is True
    assert out["results"][0] == {
        "input_index": 0,
        "id": a,
        "ok": True,
        "changed_fields": ["text", "tags"],
        "message": "Would update",
    }
    assert out["results"][1]["error"]["code"] == "NOT_FOUND"
    assert out["summary"] == {"total": 2, "updated": 1, "errors": 1}
    assert await fingerprint(deps, alice) == before


async def test_batch_size_limits(deps, alice):
    a = await _mem(deps, alice, OLD)
    before = await fingerprint(deps, alice)
    n = deps.settings.max_batch_size
    await fails(
        deps,
        alice,
        "update_memory_batch",
        "INVALID_INPUT",
        items=[{"id": a, "importance": 0.1}] * (n + 1),
    )
    assert await fingerprint(deps, alice) == before
    out = await call(deps, alice, "update_memory_batch", items=[{"id": a, "importance": 0.1}] * n)
    assert out["summary"] == {"total": n, "updated": n, "errors": 0}


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"items": None},
        {"items": []},
        {"items": {"id": 1}},
        {"items": "1"},
        {"items": [{"id": 1, "tags": []}], "dry_run": 1},
    ],
)
async def test_batch_level_invalid_input(deps, alice, args):
    await _mem(deps, alice, OLD)
    before = await fingerprint(deps, alice)
    await fails(deps, alice, "update_memory_batch", "INVALID_INPUT", **args)
    assert await fingerprint(deps, alice) == before


# --- confirm ------------------------------------------------------------------------------------------


async def test_confirm_refreshes_last_confirmed_at(deps, alice):
    mid = await _mem(deps, alice, OLD, last_confirmed_at="2020-01-01T00:00:00Z")
    before = await get(deps, alice, mid)
    start = datetime.now(UTC)
    out = await call(deps, alice, "confirm", id=mid)
    assert set(out) == {"ok", "memory_id", "last_confirmed_at"}
    assert out["ok"] is True and out["memory_id"] == mid
    confirmed = _parse(out["last_confirmed_at"])
    assert start - timedelta(seconds=5) <= confirmed <= datetime.now(UTC) + timedelta(seconds=5)
    after = await get(deps, alice, mid)
    assert after["last_confirmed_at"] == out["last_confirmed_at"]
    assert after["text"] == before["text"] and after["tags"] == before["tags"]
    # Positive feedback (SUPPLEMENT §4): salience 0 -> 0 + 0.5*0.5*(1-0) = 0.25.
    assert after["salience"] == pytest.approx(0.25, abs=1e-6)
    # No longer stale.
    listed = await call(deps, alice, "list_memories", not_confirmed_since="2021-01-01T00:00:00Z")
    assert listed["memories"] == []


async def test_confirm_keeps_the_embedding(deps, alice):
    mid = await _mem(deps, alice, OLD)
    emb = await sql(deps, "SELECT md5(embedding::text) FROM memories WHERE id = %s", (mid,))
    await call(deps, alice, "confirm", id=mid)
    assert await sql(deps, "SELECT md5(embedding::text) FROM memories WHERE id = %s", (mid,)) == emb


async def test_confirm_is_exempt_from_keep(deps, alice):
    mid = await _mem(deps, alice, OLD, keep=True, last_confirmed_at="2020-01-01T00:00:00Z")
    out = await call(deps, alice, "confirm", id=mid)
    row = await get(deps, alice, mid)
    assert row["last_confirmed_at"] == out["last_confirmed_at"] != "2020-01-01T00:00:00Z"
    assert row["keep"] is True


async def test_confirm_not_found(deps, alice):
    err = await fails(deps, alice, "confirm", "NOT_FOUND", id=999999)
    assert err.message == "Memory 999999 not found."
    mid = await _mem(deps, alice, OLD)
    await call(deps, alice, "forget", id=mid)
    before = await fingerprint(deps, alice)
    await fails(deps, alice, "confirm", "NOT_FOUND", id=mid)
    assert await fingerprint(deps, alice) == before


@pytest.mark.parametrize(
    "args", [{}, {"id": None}, {"id": "3"}, {"id": False}, {"id": 0}, {"id": -7}, {"id": 2.5}]
)
async def test_confirm_invalid_input(deps, alice, args):
    await fails(deps, alice, "confirm", "INVALID_INPUT", **args)
