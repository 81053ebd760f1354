"""list_memories, text_search, get_memory, count_memories, memory_stats, list_tags,
export_memories (tools chapter; SUPPLEMENT §2, §4)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory.deps import Deps
from memory.errors import MemoryServiceError

from .helpers import (
    FULL_FIELDS,
    MATCH_FIELDS,
    assert_fields,
    call,
    expire,
    fails,
    fingerprint,
    get,
    remember_many,
    sql,
)


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z")


async def _one_by_one(deps, user, texts, **args):
    """Separate calls, so created_at strictly increases."""
    ids = []
    for t in texts:
        ids.append(
            (await call(deps, user, "remember", text=t, dedup_policy="insert", **args))["memory_id"]
        )
    return ids


@pytest.fixture
async def mixed(deps, alice):
    """A store with active, untagged, short, long, stale, never-confirmed, deleted and expired rows."""
    ids = {}
    ids["short"] = (await call(deps, alice, "remember", text="Cats!", tags=[]))["memory_id"]
    ids["family"] = (
        await call(
            deps,
            alice,
            "remember",
            text="My son Colby lives in Los Angeles.",
            tags=["family"],
            source_provider="openai",
        )
    )["memory_id"]
    ids["stale"] = (
        await call(
            deps,
            alice,
            "remember",
            text="I used to work at the bakery downtown for years.",
            tags=["work"],
            last_confirmed_at="2020-01-01T00:00:00Z",
            source_provider="claude",
        )
    )["memory_id"]
    ids["never"] = (
        await call(
            deps,
            alice,
            "remember",
            text="Untagged note about the garden shed.",
            source_provider="claude",
        )
    )["memory_id"]
    await sql(deps, "UPDATE memories SET last_confirmed_at = NULL WHERE id = %s", (ids["never"],))
    ids["deleted"] = (
        await call(deps, alice, "remember", text="I had a goldfish named Bubbles.", tags=["pets"])
    )["memory_id"]
    await call(deps, alice, "forget", id=ids["deleted"], reason="it died")
    ids["expired"] = (
        await call(deps, alice, "remember", text="Dentist appointment on Tuesday.", tags=["health"])
    )["memory_id"]
    await expire(deps, ids["expired"])
    return ids


# --- list_memories ----------------------------------------------------------------------


async def test_list_shape_and_order(deps, alice):
    ids = await _one_by_one(
        deps,
        alice,
        ["First fact about apples.", "Second fact about pears.", "Third fact about plums."],
    )
    out = await call(deps, alice, "list_memories")
    assert out["ok"] is True
    assert [m["id"] for m in out["memories"]] == list(reversed(ids))  # created_at DESC
    for m in out["memories"]:
        assert_fields(m, MATCH_FIELDS)
        assert "score" not in m
    created = [m["created_at"] for m in out["memories"]]
    assert created == sorted(created, reverse=True)


async def test_list_default_limit_cap_and_offset(deps, alice):
    ids = await remember_many(
        deps, alice, [f"Listed fact number {i} about rivers." for i in range(60)]
    )
    newest_first = sorted(ids, reverse=True)  # one batch: same created_at, id breaks the tie
    out = await call(deps, alice, "list_memories")
    assert [m["id"] for m in out["memories"]] == newest_first[:20]
    capped = await call(deps, alice, "list_memories", limit=1000)
    assert len(capped["memories"]) == deps.settings.max_recall_limit == 50
    page = await call(deps, alice, "list_memories", limit=10, offset=55)
    assert [m["id"] for m in page["memories"]] == newest_first[55:]
    pages = []
    for offset in range(0, 60, 25):
        pages += [
            m["id"]
            for m in (await call(deps, alice, "list_memories", limit=25, offset=offset))["memories"]
        ]
    assert pages == newest_first


async def test_list_hides_deleted_and_expired_unless_include_deleted(deps, alice, mixed):
    active = {m["id"] for m in (await call(deps, alice, "list_memories"))["memories"]}
    assert active == {mixed["short"], mixed["family"], mixed["stale"], mixed["never"]}
    everything = await call(deps, alice, "list_memories", include_deleted=True)
    assert {m["id"] for m in everything["memories"]} == set(mixed.values())
    tomb = next(m for m in everything["memories"] if m["id"] == mixed["deleted"])
    assert tomb["deleted_at"] and tomb["forget_reason"] == "it died"
    gone = next(m for m in everything["memories"] if m["id"] == mixed["expired"])
    assert gone["expires_at"]


async def test_list_filters(deps, alice, mixed):
    async def ids(**f):
        return {m["id"] for m in (await call(deps, alice, "list_memories", **f))["memories"]}

    assert await ids(untagged_only=True) == {mixed["short"], mixed["never"]}
    assert await ids(max_chars=5) == {mixed["short"]}
    assert await ids(max_chars=4) == set()
    assert await ids(min_chars=37) == {mixed["stale"]}
    assert await ids(min_chars=36) == {mixed["stale"], mixed["never"]}  # at least: inclusive
    assert await ids(min_chars=6, max_chars=36) == {mixed["family"], mixed["never"]}
    assert await ids(min_chars=34, max_chars=34) == {mixed["family"]}  # at most: inclusive
    since = "2021-01-01T00:00:00Z"
    assert await ids(not_confirmed_since=since) == {mixed["stale"], mixed["never"]}
    # AND-combined
    assert await ids(untagged_only=True, not_confirmed_since=since) == {mixed["never"]}
    assert await ids(untagged_only=True, min_chars=10) == {mixed["never"]}
    assert await ids(untagged_only=True, max_chars=10, not_confirmed_since=since) == set()
    # include_deleted with filters
    assert await ids(include_deleted=True, max_chars=31) == {
        mixed["short"],
        mixed["deleted"],
        mixed["expired"],
    }
    assert await ids(include_deleted=True, untagged_only=True) == {mixed["short"], mixed["never"]}


async def test_not_confirmed_since_tracks_confirm(deps, alice):
    [a, b] = await _one_by_one(deps, alice, ["Alpha fact about boats.", "Beta fact about trains."])
    cutoff = _iso(datetime.now(UTC) + timedelta(milliseconds=1))
    await sql(deps, "SELECT pg_sleep(0.01)")
    assert {
        m["id"]
        for m in (await call(deps, alice, "list_memories", not_confirmed_since=cutoff))["memories"]
    } == {a, b}
    await call(deps, alice, "confirm", id=a)
    assert [
        m["id"]
        for m in (await call(deps, alice, "list_memories", not_confirmed_since=cutoff))["memories"]
    ] == [b]


@pytest.mark.parametrize("tool", ["list_memories", "count_memories"])
@pytest.mark.parametrize(
    "args",
    [
        {"min_chars": -1},
        {"max_chars": -1},
        {"min_chars": 10, "max_chars": 5},
        {"not_confirmed_since": "2999-01-01T00:00:00Z"},
        {"not_confirmed_since": "yesterday"},
        {"not_confirmed_since": "2024-01-01"},
        {"not_confirmed_since": "2024-01-01T00:00:00"},
        {"not_confirmed_since": 1700000000},
        {"min_chars": "5"},
        {"max_chars": 3.5},
        {"untagged_only": "yes"},
        {"include_deleted": 1},
    ],
)
async def test_filter_invalid_input(deps, alice, tool, args):
    await fails(deps, alice, tool, "INVALID_INPUT", **args)


@pytest.mark.parametrize(
    "args",
    [
        {"limit": 0},
        {"limit": -3},
        {"offset": -1},
        {"limit": "10"},
        {"offset": True},
        {"limit": 1.5},
    ],
)
async def test_list_paging_invalid_input(deps, alice, args):
    await fails(deps, alice, "list_memories", "INVALID_INPUT", **args)


# --- text_search ------------------------------------------------------------------------


async def test_text_search_substring_case_insensitive(deps, alice, mixed):
    out = await call(deps, alice, "text_search", text="COLBY lives")
    assert [m["id"] for m in out["memories"]] == [mixed["family"]]
    for m in out["memories"]:
        assert_fields(m, MATCH_FIELDS)
        assert "score" not in m
    partial = await call(deps, alice, "text_search", text="arde")  # inside "garden"
    assert [m["id"] for m in partial["memories"]] == [mixed["never"]]


async def test_text_search_excludes_deleted_and_expired(deps, alice, mixed):
    assert (await call(deps, alice, "text_search", text="goldfish"))["memories"] == []
    assert (await call(deps, alice, "text_search", text="Dentist"))["memories"] == []


async def test_text_search_wildcards_are_literal(deps, alice):
    a = (await call(deps, alice, "remember", text="I am 100% sure about this."))["memory_id"]
    await call(deps, alice, "remember", text="I am 1000 percent sure.")
    b = (await call(deps, alice, "remember", text="My username is jo_smith."))["memory_id"]
    await call(deps, alice, "remember", text="My name is joXsmith really.")
    assert [m["id"] for m in (await call(deps, alice, "text_search", text="100%"))["memories"]] == [
        a
    ]
    assert [m["id"] for m in (await call(deps, alice, "text_search", text="jo_s"))["memories"]] == [
        b
    ]
    assert (await call(deps, alice, "text_search", text="%"))["memories"][0]["id"] == a
    assert len((await call(deps, alice, "text_search", text="%"))["memories"]) == 1


async def test_text_search_limit_and_order(deps, alice):
    ids = await _one_by_one(deps, alice, [f"Zebra sighting number {i}." for i in range(3)])
    await remember_many(deps, alice, [f"Zebra count {i}." for i in range(30)])
    out = await call(deps, alice, "text_search", text="zebra")
    assert len(out["memories"]) == 20  # default limit
    out = await call(deps, alice, "text_search", text="zebra sighting", limit=2)
    assert [m["id"] for m in out["memories"]] == [ids[2], ids[1]]
    created = [
        m["created_at"]
        for m in (await call(deps, alice, "text_search", text="zebra", limit=50))["memories"]
    ]
    assert created == sorted(created, reverse=True)


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"text": ""},
        {"text": "  "},
        {"text": 5},
        {"text": "a", "limit": 0},
        {"text": "a", "limit": "3"},
    ],
)
async def test_text_search_invalid_input(deps, alice, args):
    await fails(deps, alice, "text_search", "INVALID_INPUT", **args)


# --- get_memory ---------------------------------------------------------------------------


async def test_get_memory_fields(deps, alice):
    out = await call(
        deps,
        alice,
        "remember",
        text="My son Colby lives in Los Angeles.",
        tags=["family"],
        source_provider="openai",
        importance=0.7,
        expires_at="2099-05-05T12:00:00Z",
    )
    got = await call(deps, alice, "get_memory", id=out["memory_id"])
    assert got["ok"] is True
    m = got["memory"]
    assert_fields(m, FULL_FIELDS)
    assert m["id"] == out["memory_id"]
    assert m["text"] == "My son Colby lives in Los Angeles."
    assert m["tags"] == ["family"]
    assert m["importance"] == pytest.approx(0.7)
    assert m["expires_at"] == "2099-05-05T12:00:00Z"
    assert m["source_provider"] == "openai"
    assert m["deleted_at"] is None and m["forget_reason"] is None and m["replaced_by_id"] is None
    assert m["created_at"] <= m["updated_at"]


async def test_get_memory_returns_tombstones_and_expired_rows(deps, alice, mixed):
    tomb = await get(deps, alice, mixed["deleted"])
    assert tomb["deleted_at"] is not None and tomb["forget_reason"] == "it died"
    expired = await get(deps, alice, mixed["expired"])
    assert expired["deleted_at"] is None and expired["expires_at"] is not None


async def test_get_memory_not_found(deps, alice, mixed):
    err = await fails(deps, alice, "get_memory", "NOT_FOUND", id=999999)
    assert err.message == "Memory 999999 not found."
    await call(deps, alice, "forget", id=mixed["short"], hard_delete=True)
    await fails(deps, alice, "get_memory", "NOT_FOUND", id=mixed["short"])


async def test_get_memory_accepts_integral_float(deps, alice, mixed):
    assert (await call(deps, alice, "get_memory", id=float(mixed["short"])))["memory"][
        "id"
    ] == mixed["short"]


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"id": None},
        {"id": "1"},
        {"id": True},
        {"id": 0},
        {"id": -4},
        {"id": 1.5},
        {"id": [1]},
        {"id": 2**64},
    ],
)
async def test_get_memory_invalid_input(deps, alice, args):
    await fails(deps, alice, "get_memory", "INVALID_INPUT", **args)


# --- count_memories ------------------------------------------------------------------------


async def test_count_filters(deps, alice, mixed):
    async def count(**f):
        out = await call(deps, alice, "count_memories", **f)
        assert set(out) == {"ok", "count"} and isinstance(out["count"], int)
        return out["count"]

    assert await count() == 4
    assert await count(include_deleted=True) == 6
    assert await count(tags=["family"]) == 1
    assert await count(tags=["fam", "JOB"]) == 2  # synonyms, at least one
    assert await count(tags=["pets"]) == 0  # only on a tombstone
    assert await count(tags=["pets", "health"], include_deleted=True) == 2
    assert await count(source_provider="claude") == 2
    assert await count(source_provider="Claude") == 0  # exact match
    assert await count(source_provider="claude", tags=["work"]) == 1
    assert await count(untagged_only=True) == 2
    assert await count(min_chars=37) == 1
    assert await count(max_chars=5) == 1
    assert await count(not_confirmed_since="2021-01-01T00:00:00Z") == 2
    assert (
        await count(
            untagged_only=True, not_confirmed_since="2021-01-01T00:00:00Z", source_provider="claude"
        )
        == 1
    )


async def test_count_agrees_with_list(deps, alice, mixed):
    filters = [
        {},
        {"include_deleted": True},
        {"untagged_only": True},
        {"min_chars": 10, "max_chars": 40},
        {"not_confirmed_since": "2021-01-01T00:00:00Z", "include_deleted": True},
    ]
    for f in filters:
        listed = await call(deps, alice, "list_memories", limit=50, **f)
        counted = await call(deps, alice, "count_memories", **f)
        assert counted["count"] == len(listed["memories"]), f


async def test_count_with_tags_that_normalize_to_nothing_does_not_count_everything(
    deps, alice, mixed
):
    # "x" and "!" are dropped by tag normalisation (SUPPLEMENT §2), so no memory can
    # carry them. "A memory is counted if it has at least one of these tags": the
    # answer must be 0, or the filter refused as INVALID_INPUT the way recall refuses
    # it -- never the count of every row, as if no filter had been given.
    try:
        out = await call(deps, alice, "count_memories", tags=["x", "!"])
    except MemoryServiceError as ex:
        assert ex.code == "INVALID_INPUT"
    else:
        assert out["count"] == 0, f"a tag filter that cannot match counted {out['count']} rows"


@pytest.mark.parametrize("args", [{"tags": "family"}, {"tags": [3]}, {"source_provider": 5}])
async def test_count_invalid_input(deps, alice, args):
    await fails(deps, alice, "count_memories", "INVALID_INPUT", **args)


# --- memory_stats -----------------------------------------------------------------------------


async def test_stats_fields_and_values(deps, alice):
    ids = []
    for text, importance, tags, provider in [
        ("Active fact about tea.", 0.2, ["food", "drinks"], "openai"),
        ("Active fact about cake.", 0.6, ["food"], None),
        ("Deleted fact about soup.", 0.4, ["food", "gone"], "openai"),
        ("Expired fact about juice.", 0.4, ["drinks"], "claude"),
    ]:
        args = {"text": text, "importance": importance, "tags": tags, "dedup_policy": "insert"}
        if provider:
            args["source_provider"] = provider
        ids.append((await call(deps, alice, "remember", **args))["memory_id"])
    await call(deps, alice, "forget", id=ids[2])
    await expire(deps, ids[3])

    s = await call(deps, alice, "memory_stats")
    assert s["ok"] is True
    for key in ("total", "active", "soft_deleted", "expired"):
        assert isinstance(s[key], int) and not isinstance(s[key], bool), key
    assert isinstance(s["avg_importance"], float)
    assert isinstance(s["oldest_created_at"], str) and isinstance(s["newest_created_at"], str)
    assert (s["total"], s["active"], s["soft_deleted"], s["expired"]) == (4, 2, 1, 1)
    assert s["total"] == s["active"] + s["soft_deleted"] + s["expired"]
    assert s["avg_importance"] == pytest.approx(0.4)
    first = await get(deps, alice, ids[0])
    last = await get(deps, alice, ids[3])
    assert s["oldest_created_at"] == first["created_at"]
    assert s["newest_created_at"] == last["created_at"]
    for t in s["top_tags"]:
        assert set(t) == {"tag", "count"}
    assert s["top_tags"][0] == {"tag": "food", "count": 2}
    counts = [(-t["count"], t["tag"]) for t in s["top_tags"]]
    assert counts == sorted(counts)
    by = {p["provider"]: p["count"] for p in s["by_provider"]}
    assert by == {"openai": 2, "(none)": 1, "claude": 1}
    assert sum(by.values()) == s["total"]
    for p in s["by_provider"]:
        assert set(p) == {"provider", "count"}


async def test_stats_on_empty_store(deps, alice):
    s = await call(deps, alice, "memory_stats")
    assert (s["total"], s["active"], s["soft_deleted"], s["expired"]) == (0, 0, 0, 0)
    assert s["top_tags"] == [] and s["by_provider"] == []


# --- list_tags ------------------------------------------------------------------------------------


async def test_list_tags_order_and_counts(deps, alice):
    await remember_many(deps, alice, ["Tagged one.", "Tagged two."], tags=["beta", "alpha"])
    await call(deps, alice, "remember", text="Tagged three.", tags=["gamma", "beta"])
    await call(deps, alice, "remember", text="Tagged four.", tags=["delta"])
    out = await call(deps, alice, "list_tags")
    assert out["ok"] is True
    assert out["tags"] == [
        {"tag": "beta", "count": 3},
        {"tag": "alpha", "count": 2},
        {"tag": "delta", "count": 1},
        {"tag": "gamma", "count": 1},
    ]
    limited = await call(deps, alice, "list_tags", limit=2)
    assert limited["tags"] == out["tags"][:2]
    assert (await call(deps, alice, "list_tags", limit=10**9))["tags"] == out[
        "tags"
    ]  # capped, not refused


async def test_list_tags_include_deleted(deps, alice, mixed):
    active = {t["tag"]: t["count"] for t in (await call(deps, alice, "list_tags"))["tags"]}
    assert active == {"family": 1, "work": 1}
    everything = {
        t["tag"]: t["count"]
        for t in (await call(deps, alice, "list_tags", include_deleted=True))["tags"]
    }
    assert everything == {"family": 1, "work": 1, "pets": 1, "health": 1}


@pytest.mark.parametrize(
    "args", [{"limit": 0}, {"limit": -1}, {"limit": "5"}, {"include_deleted": "true"}]
)
async def test_list_tags_invalid_input(deps, alice, args):
    await fails(deps, alice, "list_tags", "INVALID_INPUT", **args)


# --- export_memories ---------------------------------------------------------------------------------


async def test_export_oldest_first_with_deleted_by_default(deps, alice, mixed):
    out = await call(deps, alice, "export_memories")
    assert out["ok"] is True
    assert out["count"] == len(out["memories"]) == 6
    ids = [m["id"] for m in out["memories"]]
    assert ids == sorted(mixed.values())  # created one by one: oldest first
    for m in out["memories"]:
        assert_fields(m, FULL_FIELDS)
        assert "score" not in m
    tomb = next(m for m in out["memories"] if m["id"] == mixed["deleted"])
    assert tomb["deleted_at"] and tomb["forget_reason"] == "it died"
    full = await get(deps, alice, mixed["family"])
    assert next(m for m in out["memories"] if m["id"] == mixed["family"]) == full


async def test_export_without_deleted(deps, alice, mixed):
    out = await call(deps, alice, "export_memories", include_deleted=False)
    ids = {m["id"] for m in out["memories"]}
    assert mixed["deleted"] not in ids
    assert {mixed["short"], mixed["family"], mixed["stale"], mixed["never"]} <= ids
    assert out["count"] == len(out["memories"])


async def test_export_limit_exceeded(deps, alice, settings):
    small = Deps(
        settings=deps.settings.with_overrides(export_max_rows=2),
        pool=deps.pool,
        embedder=deps.embedder,
        keyring=deps.keyring,  # sealed rows: the same keys
    )
    await remember_many(deps, alice, ["One fact.", "Two facts."])
    assert (await call(small, alice, "export_memories"))["count"] == 2  # exactly the cap: fine
    third = (await call(deps, alice, "remember", text="Three facts."))["memory_id"]
    await call(deps, alice, "forget", id=third)
    before = await fingerprint(deps, alice)
    err = await fails(small, alice, "export_memories", "LIMIT_EXCEEDED")
    assert "2" in err.message
    # Not counting the tombstone brings it back under the cap.
    assert (await call(small, alice, "export_memories", include_deleted=False))["count"] == 2
    assert await fingerprint(deps, alice) == before


async def test_export_empty_store(deps, alice):
    out = await call(deps, alice, "export_memories")
    assert out["count"] == 0 and out["memories"] == []


async def test_reads_change_nothing(deps, alice, mixed):
    before = await fingerprint(deps, alice)
    for tool, args in [
        ("list_memories", {"include_deleted": True}),
        ("text_search", {"text": "a"}),
        ("get_memory", {"id": mixed["family"]}),
        ("count_memories", {}),
        ("memory_stats", {}),
        ("list_tags", {}),
        ("export_memories", {}),
    ]:
        await call(deps, alice, tool, **args)
    assert await fingerprint(deps, alice) == before
