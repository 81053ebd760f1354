"""Event time (issue 17): occurred_at, valid_from, valid_to on writes, reads and exports."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memory.errors import INVALID_INPUT

from .helpers import call, fails, fingerprint, get, row_count, sql

EVENT = ("occurred_at", "valid_from", "valid_to")


async def _remember(deps, user, text, **args):
    out = await call(deps, user, "remember", text=text, dedup_policy="insert", **args)
    return out["memory_id"]


async def _parsed_flag(deps, memory_id) -> bool:
    rows = await sql(deps, "SELECT occurred_at_parsed FROM memories WHERE id = %s", (memory_id,))
    return bool(rows[0][0])


def _day(offset_days: int = 0) -> str:
    day = datetime.now(UTC).date() + timedelta(days=offset_days)
    return f"{day.isoformat()}T00:00:00Z"


# --- remember ------------------------------------------------------------------------------


async def test_given_event_times_are_stored_and_shown_everywhere(deps, alice):
    mid = await _remember(
        deps,
        alice,
        "I worked at Acme as a designer.",
        occurred_at="2021-03-01T09:00:00+01:00",
        valid_from="2021-03-01T00:00:00Z",
        valid_to="2023-06-30T00:00:00Z",
    )
    plain = await _remember(deps, alice, "I like green tea.")
    memory = await get(deps, alice, mid)
    assert memory["occurred_at"] == "2021-03-01T08:00:00Z"  # out: UTC with Z
    assert memory["valid_from"] == "2021-03-01T00:00:00Z"
    assert memory["valid_to"] == "2023-06-30T00:00:00Z"
    assert memory["occurred_at_parsed"] is False
    # get_memory lists every field: unset ones are null.
    bare = await get(deps, alice, plain)
    assert [bare[f] for f in EVENT] == [None, None, None]

    # Listings, text search, recall and export carry them when set, like expires_at.
    listed = {m["id"]: m for m in (await call(deps, alice, "list_memories"))["memories"]}
    found = {m["id"]: m for m in (await call(deps, alice, "text_search", text="a"))["memories"]}
    recalled = {
        m["id"]: m
        # as_of inside the span: at now it has ended, and recall hides what no longer holds.
        for m in (
            await call(
                deps, alice, "recall", query="Acme designer job tea", as_of="2022-01-01T00:00:00Z"
            )
        )["matches"]
    }
    exported = {m["id"]: m for m in (await call(deps, alice, "export_memories"))["memories"]}
    for rows in (listed, found, recalled, exported):
        assert [rows[mid][f] for f in EVENT] == [
            "2021-03-01T08:00:00Z",
            "2021-03-01T00:00:00Z",
            "2023-06-30T00:00:00Z",
        ]
    for rows in (listed, found, recalled):
        assert not set(EVENT) & set(rows[plain])


async def test_a_date_the_text_states_becomes_occurred_at(deps, alice):
    mid = await _remember(deps, alice, "We adopted Biscuit on 2023-05-07.")
    memory = await get(deps, alice, mid)
    assert memory["occurred_at"] == "2023-05-07T00:00:00Z"
    assert memory["occurred_at_parsed"] is True
    # Only occurred_at: the span a fact holds for is never guessed.
    assert memory["valid_from"] is None and memory["valid_to"] is None
    bracketed = await _remember(deps, alice, "[7 May 2023] Ana started at Acme.")
    assert (await get(deps, alice, bracketed))["occurred_at"] == "2023-05-07T00:00:00Z"


async def test_the_callers_occurred_at_wins_over_the_text(deps, alice):
    mid = await _remember(
        deps, alice, "We adopted Biscuit on 2023-05-07.", occurred_at="2023-05-06T12:00:00Z"
    )
    memory = await get(deps, alice, mid)
    assert memory["occurred_at"] == "2023-05-06T12:00:00Z"
    assert memory["occurred_at_parsed"] is False


async def test_ambiguous_or_several_dates_give_no_occurred_at(deps, alice):
    for text in (
        "The lease was signed on 03/04/2023.",
        "My birthday is on May 7.",
        "I moved on 2023-05-07 and started work on 2023-05-08.",
    ):
        mid = await _remember(deps, alice, text)
        assert (await get(deps, alice, mid))["occurred_at"] is None, text


async def test_relative_dates_count_from_reference_time_or_the_time_of_storing(deps, alice):
    # 2023-05-10 is a Wednesday.
    mid = await _remember(
        deps, alice, "Last Tuesday I met Dana for lunch.", reference_time="2023-05-10T15:00:00Z"
    )
    assert (await get(deps, alice, mid))["occurred_at"] == "2023-05-09T00:00:00Z"
    now = await _remember(deps, alice, "Yesterday I ran ten kilometres.")
    assert (await get(deps, alice, now))["occurred_at"] in {_day(-1), _day(-2)}


async def test_relative_dates_count_in_the_days_of_the_callers_offset(deps, alice):
    # 20:00 on Friday 4 December in California is already Saturday 5 December in UTC.
    evening = "2026-12-04T20:00:00-08:00"
    yesterday = await _remember(
        deps, alice, "Yesterday I went to the dentist.", reference_time=evening
    )
    tuesday = await _remember(deps, alice, "Last Tuesday I met Dana.", reference_time=evening)
    assert (await get(deps, alice, yesterday))["occurred_at"] == "2026-12-03T00:00:00Z"
    assert (await get(deps, alice, tuesday))["occurred_at"] == "2026-12-01T00:00:00Z"
    # The same instant written in UTC is the next day there.
    utc = await _remember(
        deps, alice, "Yesterday I repaired the bike.", reference_time="2026-12-05T04:00:00Z"
    )
    assert (await get(deps, alice, utc))["occurred_at"] == "2026-12-04T00:00:00Z"


async def test_batch_items_take_event_time_and_their_own_reference_time(deps, alice):
    out = await call(
        deps,
        alice,
        "remember_batch",
        dedup_policy="insert",
        items=[
            {"text": "Yesterday I bought a bike.", "reference_time": "2023-01-02T10:00:00Z"},
            {"text": "Yesterday I sold my car.", "reference_time": "2024-07-01T10:00:00Z"},
            {
                "text": "I lived in Porto.",
                "valid_from": "2015-01-01T00:00:00Z",
                "valid_to": "2019-12-31T00:00:00Z",
            },
            {"text": "I lived in Braga.", "valid_from": "2020-01-01T00:00:00Z", "valid_to": "x"},
        ],
    )
    assert out["summary"] == {"total": 4, "succeeded": 3, "failed": 1}
    ids = [r.get("memory_id") for r in out["results"]]
    assert (await get(deps, alice, ids[0]))["occurred_at"] == "2023-01-01T00:00:00Z"
    assert (await get(deps, alice, ids[1]))["occurred_at"] == "2024-06-30T00:00:00Z"
    porto = await get(deps, alice, ids[2])
    assert (porto["valid_from"], porto["valid_to"]) == (
        "2015-01-01T00:00:00Z",
        "2019-12-31T00:00:00Z",
    )
    error = out["results"][3]["error"]
    assert error["code"] == INVALID_INPUT and error["detail"]["field"] == "valid_to"


async def test_bad_event_times_are_refused_and_store_nothing(deps, alice):
    before = await row_count(deps, alice)
    for field in (*EVENT, "reference_time"):
        for value in ("2023-05-07", "yesterday", " 2023-05-07T00:00:00Z", 17):
            ex = await fails(deps, alice, "remember", INVALID_INPUT, text="Fact.", **{field: value})
            assert ex.detail["field"] == field
    ex = await fails(
        deps,
        alice,
        "remember",
        INVALID_INPUT,
        text="I lived in Porto.",
        valid_from="2020-01-01T00:00:00Z",
        valid_to="2019-01-01T00:00:00Z",
    )
    assert ex.detail["field"] == "valid_from"
    assert "valid_to" in ex.message
    assert await row_count(deps, alice) == before


async def test_a_one_instant_span_is_allowed(deps, alice):
    mid = await _remember(
        deps,
        alice,
        "The shop was open that one day.",
        valid_from="2020-01-01T00:00:00Z",
        valid_to="2020-01-01T00:00:00Z",
    )
    assert (await get(deps, alice, mid))["valid_to"] == "2020-01-01T00:00:00Z"


# --- update_memory -------------------------------------------------------------------------


async def test_update_sets_and_clears_event_times(deps, alice):
    mid = await _remember(deps, alice, "I lived in Porto.")
    out = await call(
        deps,
        alice,
        "update_memory",
        id=mid,
        occurred_at="2015-01-01T00:00:00Z",
        valid_from="2015-01-01T00:00:00Z",
        valid_to="2019-12-31T00:00:00Z",
    )
    assert out["changed_fields"] == ["occurred_at", "valid_from", "valid_to"]
    memory = await get(deps, alice, mid)
    assert memory["valid_to"] == "2019-12-31T00:00:00Z"
    await call(deps, alice, "update_memory", id=mid, valid_to=None, occurred_at=None)
    memory = await get(deps, alice, mid)
    assert memory["valid_to"] is None and memory["occurred_at"] is None
    assert memory["valid_from"] == "2015-01-01T00:00:00Z"


async def test_update_refuses_a_span_that_ends_before_it_starts(deps, alice):
    mid = await _remember(
        deps,
        alice,
        "I lived in Porto.",
        valid_from="2015-01-01T00:00:00Z",
        valid_to="2019-12-31T00:00:00Z",
    )
    before = await fingerprint(deps, alice)
    # Against the row's own end, and in the call itself; dry runs too.
    for args in (
        {"valid_from": "2020-01-01T00:00:00Z"},
        {"valid_to": "2014-01-01T00:00:00Z"},
        {"valid_from": "2020-01-01T00:00:00Z", "valid_to": "2019-01-01T00:00:00Z"},
        {"valid_from": "2020-01-01T00:00:00Z", "dry_run": True},
        {"occurred_at": "May 2023"},
    ):
        ex = await fails(deps, alice, "update_memory", INVALID_INPUT, id=mid, **args)
        assert ex.detail["field"] in EVENT, args
    assert await fingerprint(deps, alice) == before
    # Moving both ends together is fine.
    await call(
        deps,
        alice,
        "update_memory",
        id=mid,
        valid_from="2020-01-01T00:00:00Z",
        valid_to="2021-01-01T00:00:00Z",
    )
    out = await call(
        deps,
        alice,
        "update_memory_batch",
        items=[
            {"id": mid, "valid_to": "2000-01-01T00:00:00Z"},
            {"id": mid, "occurred_at": "2020-06-01T00:00:00Z"},
        ],
    )
    assert out["summary"] == {"total": 2, "updated": 1, "errors": 1}
    assert out["results"][0]["error"]["detail"]["field"] == "valid_to"
    memory = await get(deps, alice, mid)
    assert memory["valid_to"] == "2021-01-01T00:00:00Z"
    assert memory["occurred_at"] == "2020-06-01T00:00:00Z"


async def test_a_new_text_is_read_again_unless_the_caller_gave_occurred_at(deps, alice):
    parsed = await _remember(deps, alice, "We adopted Biscuit on 2023-05-07.")
    await call(deps, alice, "update_memory", id=parsed, text="We adopted Biscuit on 8 May 2023.")
    assert (await get(deps, alice, parsed))["occurred_at"] == "2023-05-08T00:00:00Z"
    assert await _parsed_flag(deps, parsed)
    # A new text with no date takes the date that came from the old one away.
    await call(deps, alice, "update_memory", id=parsed, text="We adopted a dog called Biscuit.")
    assert (await get(deps, alice, parsed))["occurred_at"] is None
    assert not await _parsed_flag(deps, parsed)

    given = await _remember(deps, alice, "I started running.", occurred_at="2022-04-01T00:00:00Z")
    await call(deps, alice, "update_memory", id=given, text="I started running on 2023-05-07.")
    assert (await get(deps, alice, given))["occurred_at"] == "2022-04-01T00:00:00Z"

    # Text and occurred_at in one call: the caller's value.
    await call(
        deps,
        alice,
        "update_memory",
        id=parsed,
        text="We adopted Biscuit on 2023-05-09.",
        occurred_at="2023-05-01T00:00:00Z",
    )
    assert (await get(deps, alice, parsed))["occurred_at"] == "2023-05-01T00:00:00Z"
    assert not await _parsed_flag(deps, parsed)


async def test_relative_dates_in_an_updated_text_count_from_created_at(deps, alice):
    mid = await _remember(deps, alice, "I met Dana.")
    await sql(
        deps,
        "UPDATE memories SET created_at = '2023-05-10T15:00:00Z' WHERE id = %s",
        (mid,),
    )
    await call(deps, alice, "update_memory", id=mid, text="I met Dana yesterday.")
    assert (await get(deps, alice, mid))["occurred_at"] == "2023-05-09T00:00:00Z"
