"""Time in queries: a question's window, validity at as_of, before/after anchors, first/latest.

recall (and search_memory, build_context_prompt) read the time a question names
against ``as_of`` (default now): facts of that time rank first, facts whose
validity span misses it are hidden, and ``explain`` shows the time component.
"""

from __future__ import annotations

from .helpers import call, fails

AS_OF = "2026-05-13T12:00:00Z"


async def _remember(deps, user: int, text: str, **args) -> int:
    out = await call(deps, user, "remember", text=text, dedup_policy="insert", **args)
    return out["memory_id"]


def _ids(out) -> list[int]:
    return [m["id"] for m in out["matches"]]


async def test_a_question_about_a_year_puts_that_years_facts_first(deps, alice):
    paris = await _remember(
        deps, alice, "I went on a city trip to Paris.", occurred_at="2024-06-01T00:00:00Z"
    )
    rome = await _remember(
        deps, alice, "I went on a trip to Rome.", occurred_at="2023-04-10T00:00:00Z"
    )
    plain = await call(deps, alice, "recall", query="Which city did I visit?", as_of=AS_OF)
    assert _ids(plain)[0] == paris  # the closer wording, with no time asked
    out = await call(
        deps, alice, "recall", query="Which city did I visit in 2023?", as_of=AS_OF, explain=True
    )
    assert _ids(out)[0] == rome
    explained = {m["id"]: m["explain"] for m in out["matches"]}
    assert explained[rome]["time"] > 0 and explained[paris]["time"] == 0
    assert explained[rome]["window"] == ["2023-01-01T00:00:00Z", "2024-01-01T00:00:00Z"]
    # The score stays the raw cosine.
    assert all(0 < m["score"] <= 1 for m in out["matches"])


async def test_a_date_read_from_the_text_counts_as_the_facts_time(deps, alice):
    march = await _remember(deps, alice, "On 2026-03-14 I ran a half marathon.")
    await _remember(deps, alice, "I ran a half marathon in great weather.")
    out = await call(deps, alice, "recall", query="What did I run last March?", as_of=AS_OF)
    assert _ids(out)[0] == march


async def test_validity_decides_what_held_then_and_what_holds_now(deps, alice):
    lisbon = await _remember(
        deps,
        alice,
        "I live in Lisbon.",
        valid_from="2019-01-01T00:00:00Z",
        valid_to="2022-06-30T00:00:00Z",
    )
    berlin = await _remember(deps, alice, "I live in Berlin.", valid_from="2022-07-01T00:00:00Z")
    now = await call(deps, alice, "recall", query="Where do I live?", as_of=AS_OF)
    assert _ids(now) == [berlin]  # Lisbon's span has ended
    then = await call(deps, alice, "recall", query="Where did I live in 2021?", as_of=AS_OF)
    assert _ids(then) == [lisbon]  # Berlin's span had not begun
    back = await call(deps, alice, "recall", query="Where do I live?", as_of="2020-05-01T00:00:00Z")
    assert _ids(back) == [lisbon]
    # The same for the prompt a model without this server would get.
    prompt = await call(
        deps, alice, "build_context_prompt", user_prompt="Where do I live?", as_of=AS_OF
    )
    assert "Berlin" in prompt["prompt"] and "Lisbon" not in prompt["prompt"]


async def test_before_an_event_the_store_knows_of(deps, alice):
    await _remember(deps, alice, "My trip to Rome was on 10 May 2024.")
    camera = await _remember(deps, alice, "I bought a camera on 1 May 2024.")
    bike = await _remember(deps, alice, "I bought a new bike on 20 May 2024.")
    before = await call(
        deps, alice, "recall", query="What did I buy before my trip to Rome?", as_of=AS_OF
    )
    ids = _ids(before)
    assert ids.index(camera) < ids.index(bike)
    after = await call(
        deps, alice, "recall", query="What did I buy after my trip to Rome?", as_of=AS_OF
    )
    ids = _ids(after)
    assert ids.index(bike) < ids.index(camera)


async def test_first_and_most_recent(deps, alice):
    first = await _remember(
        deps, alice, "I bought a used Fiat Panda.", occurred_at="2012-03-01T00:00:00Z"
    )
    second = await _remember(
        deps, alice, "I bought a new Volvo estate car.", occurred_at="2018-09-01T00:00:00Z"
    )
    third = await _remember(
        deps, alice, "I bought an electric Kia car.", occurred_at="2024-02-01T00:00:00Z"
    )
    earliest = await call(deps, alice, "recall", query="What was the first car I bought?")
    assert _ids(earliest)[0] == first
    latest = await call(deps, alice, "recall", query="What car did I buy most recently?")
    assert _ids(latest)[0] == third
    assert second in _ids(latest)


async def test_first_wins_over_latest_truth_first_and_recurring_events_are_no_conflict(deps, alice):
    first = await _remember(
        deps, alice, "I ran the Berlin half marathon in 2019.", occurred_at="2019-04-07T09:00:00Z"
    )
    again = await _remember(
        deps, alice, "I ran the Berlin half marathon in 2023.", occurred_at="2023-04-02T09:00:00Z"
    )
    out = await call(deps, alice, "recall", query="When did I first run the Berlin half marathon?")
    assert _ids(out)[:2] == [first, again]
    # Two runs in two years are two events, not one fact that changed.
    assert not any("older_than" in m for m in out["matches"])
    latest = await call(
        deps, alice, "recall", query="When did I last run the Berlin half marathon?"
    )
    assert again in _ids(latest)


async def test_a_window_brings_in_facts_of_that_time_beyond_the_nearest(deps, alice):
    fillers = [f"I went to a concert with friend number {i}." for i in range(60)]
    await call(
        deps,
        alice,
        "remember_batch",
        items=[{"text": t} for t in fillers],
        dedup_policy="insert",
    )
    old = await _remember(
        deps, alice, "We saw a jazz band downtown.", occurred_at="2021-08-20T00:00:00Z"
    )
    out = await call(
        deps, alice, "recall", query="Which concert did I go to in 2021?", limit=3, as_of=AS_OF
    )
    assert old in _ids(out)


async def test_another_users_facts_never_place_my_anchor(deps, alice, bob):
    await _remember(deps, bob, "My trip to Rome was on 10 May 2024.")
    camera = await _remember(deps, alice, "I bought a camera on 1 May 2024.")
    out = await call(
        deps, alice, "recall", query="What did I buy before my trip to Rome?", explain=True
    )
    assert _ids(out) == [camera]
    assert "window" not in out["matches"][0]["explain"]


async def test_a_bad_as_of_is_refused_with_the_field_named(deps, alice):
    await _remember(deps, alice, "I live in Berlin.")
    error = await fails(deps, alice, "recall", "INVALID_INPUT", query="where", as_of="last week")
    assert (error.detail or {}).get("field") == "as_of"


async def test_another_users_facts_of_the_window_never_come_in(deps, alice, bob):
    await _remember(deps, bob, "We saw a jazz band downtown.", occurred_at="2021-08-20T00:00:00Z")
    mine = await _remember(deps, alice, "I like quiet evenings at home.")
    out = await call(deps, alice, "recall", query="Which concert did I go to in 2021?", as_of=AS_OF)
    assert _ids(out) == [mine]


async def test_a_question_counts_its_days_at_the_offset_of_as_of(deps, alice):
    dentist = await _remember(
        deps, alice, "I went to the dentist.", occurred_at="2026-12-03T00:00:00Z"
    )
    await _remember(deps, alice, "I went to the dentist again.", occurred_at="2026-12-04T00:00:00Z")
    out = await call(
        deps,
        alice,
        "recall",
        query="Did I go to the dentist yesterday?",
        as_of="2026-12-04T20:00:00-08:00",  # 04:00 on 5 December in UTC
        explain=True,
    )
    assert _ids(out)[0] == dentist
    assert out["matches"][0]["explain"]["window"] == [
        "2026-12-03T00:00:00Z",
        "2026-12-04T00:00:00Z",
    ]


async def test_a_day_holds_what_the_caller_did_on_it_by_their_clock(deps, alice):
    # The caller is in California: 20:00 on 4 December, 04:00 on the 5th in UTC.
    evening = await _remember(
        deps, alice, "I went to the cinema.", occurred_at="2026-12-03T20:30:00-08:00"
    )
    morning = await _remember(
        deps, alice, "I went to the cinema again.", occurred_at="2026-12-04T10:00:00-08:00"
    )
    out = await call(
        deps,
        alice,
        "recall",
        query="Did I go to the cinema yesterday?",
        as_of="2026-12-04T20:00:00-08:00",
        explain=True,
    )
    explained = {m["id"]: m["explain"] for m in out["matches"]}
    assert explained[evening]["time"] > 0  # 04:30 on the 4th in UTC, the 3rd for them
    assert explained[morning]["time"] == 0
    assert _ids(out)[0] == evening
