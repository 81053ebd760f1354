"""Time in a question (memory.rules.query_time): windows, order, anchors; pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from memory.rules.query_time import Anchor, read_question

#: A Wednesday.
AS_OF = datetime(2026, 5, 13, 15, 30, tzinfo=UTC)


def d(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


@pytest.mark.parametrize(
    ("question", "start", "end"),
    [
        ("What did I do in 2023?", d(2023, 1, 1), d(2024, 1, 1)),
        ("Where did I live during 2021?", d(2021, 1, 1), d(2022, 1, 1)),
        ("What did I cook in March 2024?", d(2024, 3, 1), d(2024, 4, 1)),
        ("what happened last March", d(2026, 3, 1), d(2026, 4, 1)),
        ("what did I read last May", d(2025, 5, 1), d(2025, 6, 1)),
        ("what happened in March", d(2026, 3, 1), d(2026, 4, 1)),
        ("plans for this December", d(2026, 12, 1), d(2027, 1, 1)),
        ("what happened in June", d(2025, 6, 1), d(2025, 7, 1)),
        ("What did I buy two weeks ago?", d(2026, 4, 26), d(2026, 5, 3)),
        ("Who did I meet 3 days ago?", d(2026, 5, 10), d(2026, 5, 11)),
        ("what did I start a month ago", d(2026, 4, 1), d(2026, 5, 1)),
        ("where was I two years ago", d(2024, 1, 1), d(2025, 1, 1)),
        ("What did I eat yesterday?", d(2026, 5, 12), d(2026, 5, 13)),
        ("What did I do last Tuesday?", d(2026, 5, 12), d(2026, 5, 13)),
        ("what did I do on 2025-12-24", d(2025, 12, 24), d(2025, 12, 25)),
        ("what did I do on 7 May 2023", d(2023, 5, 7), d(2023, 5, 8)),
        ("what did I do last week", d(2026, 5, 4), d(2026, 5, 11)),
        ("what did I do this week", d(2026, 5, 11), d(2026, 5, 18)),
        ("what did I do last month", d(2026, 4, 1), d(2026, 5, 1)),
        ("what did I do last year", d(2025, 1, 1), d(2026, 1, 1)),
        ("what did I do in the past month", d(2026, 4, 13, 15, 30), AS_OF),
        ("What did I do before 2023?", None, d(2023, 1, 1)),
        ("What did I do until 2023?", None, d(2024, 1, 1)),
        ("What have I read since March 2025?", d(2025, 3, 1), None),
        ("What did I do after 7 May 2023?", d(2023, 5, 8), None),
        ("What did I cook the day before yesterday?", d(2026, 5, 11), d(2026, 5, 12)),
        ("What did I plant in May?", d(2026, 5, 1), d(2026, 6, 1)),
    ],
)
def test_windows(question: str, start: datetime | None, end: datetime | None) -> None:
    got = read_question(question, AS_OF)
    assert got.window is not None, question
    assert (got.window.start, got.window.end) == (start, end)


@pytest.mark.parametrize(
    "question",
    [
        "Where is my 2019 Honda Civic serviced?",  # a model year
        "What is my sister's name?",
        "What did I do on 03/04/2023?",  # day and month order unknown
        "Which restaurant did I like on May 7?",  # no year: ambiguous
        "This may sound odd, but where do I work?",  # "may", the word
        "Since I'm vegetarian, what should I cook tonight?",  # a reason, not a time
        "What do we eat on the Fourth of July?",  # a feast, not the month
        "What happened on 9999-12-31?",  # the calendar's last day has no next
    ],
)
def test_no_window(question: str) -> None:
    assert read_question(question, AS_OF).window is None


@pytest.mark.parametrize(
    ("question", "order"),
    [
        ("What was the first car I owned?", "earliest"),
        ("When did I originally move to Lisbon?", "earliest"),
        ("What is my most recent hobby?", "latest"),
        ("Where do I live now?", "latest"),
        ("What am I currently reading?", "latest"),
        ("What is my first name?", None),
        ("Did I take a first aid course?", None),
        ("What do I like?", None),
    ],
)
def test_order(question: str, order: str | None) -> None:
    assert read_question(question, AS_OF).order == order


def test_an_undated_before_is_an_anchor_for_the_caller() -> None:
    got = read_question("What did I buy before my trip to Rome?", AS_OF)
    assert got.window is None
    assert got.anchor == Anchor("before", "my trip to Rome")
    after = read_question("Where did I eat after the wedding, and with whom?", AS_OF)
    assert after.anchor == Anchor("after", "the wedding")


def test_a_clause_after_since_is_no_bound_but_its_month_still_counts() -> None:
    got = read_question("What should I pack, since we fly to Rome in June?", AS_OF)
    assert got.anchor is None
    assert got.window is not None and got.window.start == d(2025, 6, 1)


@pytest.mark.parametrize(
    ("question", "as_of"),
    [
        ("what did I do last week", datetime(1, 1, 1, tzinfo=UTC)),
        ("what did I do this week", datetime(9999, 12, 31, tzinfo=UTC)),
        ("what happened two years ago", datetime(1, 6, 1, tzinfo=UTC)),
    ],
)
def test_the_ends_of_the_calendar_read_as_no_time(question: str, as_of: datetime) -> None:
    assert read_question(question, as_of).window is None


def test_a_window_holds_and_overlaps() -> None:
    window = read_question("in 2021", AS_OF).window
    assert window is not None
    assert window.holds(d(2021, 6, 1)) and not window.holds(d(2022, 1, 1))
    assert window.overlaps(d(2019, 1, 1), d(2021, 2, 1))
    assert window.overlaps(d(2020, 1, 1), None)
    assert not window.overlaps(d(2022, 1, 1), None)
    assert not window.overlaps(None, d(2020, 12, 31))


def test_as_of_must_be_aware() -> None:
    with pytest.raises(ValueError):
        read_question("in 2021", datetime(2026, 1, 1))


def test_first_lifts_the_earliest_of_the_relevant_and_only_when_times_are_spread() -> None:
    from memory.rules.query_time import ORDER_MARGIN, EventTime, time_scores

    first = read_question("What was the first car I bought?", AS_OF)
    times = {
        1: EventTime(d(2012, 3, 1), None, None, AS_OF),
        2: EventTime(d(2018, 9, 1), None, None, AS_OF),
        3: EventTime(d(2001, 1, 1), None, None, AS_OF),  # earliest, but not about cars
    }
    relevance = {1: 0.6, 2: 0.85, 3: 0.2}
    assert time_scores(times, first, relevance) == {1: ORDER_MARGIN, 2: 0.0, 3: 0.0}
    # Written down the same day, with no event time: no order to trust.
    same_day = {k: EventTime(None, None, None, AS_OF.replace(hour=h)) for k, h in ((1, 9), (2, 10))}
    assert time_scores(same_day, first, {1: 0.6, 2: 0.85}) == {1: 0.0, 2: 0.0}


CALIFORNIA = timezone(timedelta(hours=-8))


def test_a_day_holds_the_callers_instants_and_the_stored_dates_of_that_day() -> None:
    # 20:00 on 4 December in California is 04:00 on 5 December in UTC.
    when = read_question("What did I do yesterday?", datetime(2026, 12, 4, 20, tzinfo=CALIFORNIA))
    window = when.window
    assert window is not None
    assert (window.start, window.end) == (d(2026, 12, 3), d(2026, 12, 4))
    assert window.holds(d(2026, 12, 3))  # a stored date: 3 December
    assert window.holds(datetime(2026, 12, 3, 20, tzinfo=CALIFORNIA))  # the caller's evening
    assert window.holds(datetime(2026, 12, 3, 0, 30, tzinfo=CALIFORNIA))
    assert not window.holds(datetime(2026, 12, 4, 10, tzinfo=CALIFORNIA))  # today, for them
    assert not window.holds(datetime(2026, 12, 2, 23, tzinfo=CALIFORNIA))
    assert window.widest() == (d(2026, 12, 3), d(2026, 12, 4, 8))


def test_a_span_from_a_day_keeps_both_readings() -> None:
    when = read_question(
        "What happened since yesterday?", datetime(2026, 12, 4, 20, tzinfo=CALIFORNIA)
    )
    assert when.window is not None and when.window.end is None
    assert when.window.holds(d(2026, 12, 3)) and when.window.holds(d(2026, 12, 3, 9))
    assert not when.window.holds(d(2026, 12, 3, 7))  # 23:00 on the 2nd in California


def test_a_rolling_window_near_the_calendars_start_is_no_window() -> None:
    as_of = datetime(1, 1, 8, 5, tzinfo=timezone(timedelta(hours=14)))
    assert read_question("Did I run in the past week?", as_of).window is None
