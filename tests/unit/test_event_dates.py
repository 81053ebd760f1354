"""Unit tests for memory.rules.event_dates: the one day a text says its fact happened on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.rules.event_dates import event_date

#: A Wednesday afternoon.
REF = datetime(2023, 5, 10, 15, 0, tzinfo=UTC)


def day(year: int, month: int, d: int, *time: int) -> datetime:
    return datetime(year, month, d, *time, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # ISO dates, with an optional time (no offset: UTC).
        ("We adopted Biscuit on 2023-05-07.", day(2023, 5, 7)),
        ("2023-05-07: moved to Lisbon", day(2023, 5, 7)),
        ("Flight lands 2023-05-07T14:30", day(2023, 5, 7, 14, 30)),
        ("Flight lands 2023-05-07 14:30:05", day(2023, 5, 7, 14, 30, 5)),
        ("Call at 2023-05-07T14:30:00+02:00", day(2023, 5, 7, 12, 30)),
        ("Call at 2023-05-07T23:30:00-01:00", day(2023, 5, 8, 0, 30)),
        ("Call at 2023-05-07T14:30:00Z.", day(2023, 5, 7, 14, 30)),
        # Month-name dates with a year.
        ("[7 May 2023] Ana started at Acme", day(2023, 5, 7)),
        ("Ana started at Acme on 7 May 2023", day(2023, 5, 7)),
        ("the 7th of May 2023 was my first run", day(2023, 5, 7)),
        ("on 21st May, 2023 we married", day(2023, 5, 21)),
        ("May 7, 2023: I quit coffee", day(2023, 5, 7)),
        ("I quit coffee on May 7th 2023", day(2023, 5, 7)),
        ("SEPT. 3 2022 was the move", day(2022, 9, 3)),
        ("on 3 sep 2022 we moved", day(2022, 9, 3)),
        ("Born December 25, 1990", day(1990, 12, 25)),
        ("Leap day: 29 February 2024", day(2024, 2, 29)),
        # Relative to the reference (Wednesday 2023-05-10).
        ("Today I started learning Portuguese", day(2023, 5, 10)),
        ("I ran 10 km yesterday", day(2023, 5, 9)),
        ("the day before yesterday I met Dana", day(2023, 5, 8)),
        ("last Tuesday I met Dana", day(2023, 5, 9)),
        ("Last Wednesday I met Dana", day(2023, 5, 3)),  # on a Wednesday: a week before
        ("last Sunday was my birthday", day(2023, 5, 7)),
        ("3 days ago I broke my wrist", day(2023, 5, 7)),
        ("two weeks ago I changed jobs", day(2023, 4, 26)),
        ("a week ago I changed jobs", day(2023, 5, 3)),
        ("I moved here a month ago", day(2023, 4, 10)),
        ("I moved here 18 months ago", day(2021, 11, 10)),
        ("ten years ago I lived in Oslo", day(2013, 5, 10)),
        ("one day ago", day(2023, 5, 9)),
        ("last week I got promoted", day(2023, 5, 3)),
        ("last month I got promoted", day(2023, 4, 10)),
        ("last year I got promoted", day(2022, 5, 10)),
        # The same day twice is that day.
        ("On 2023-05-07 (7 May 2023) we met", day(2023, 5, 7)),
        ("Yesterday, 2023-05-09, we met", day(2023, 5, 9)),
    ],
)
def test_reads_the_one_date_a_text_states(text: str, expected: datetime) -> None:
    found = event_date(text, REF)
    assert found == expected
    assert found is not None and found.tzinfo is UTC


@pytest.mark.parametrize(
    "text",
    [
        "I like green tea.",
        # Numeric dates whose order is unknown.
        "We met on 03/04/2023.",
        "We met on 3.4.2023.",
        "We met on 03-04-2023.",
        # A month without a year, a month and year without a day.
        "My birthday is on May 7.",
        "My birthday is the 7th of May.",
        "We met in May.",
        "We met in May 2023.",
        # Impossible dates.
        "on 2023-02-30",
        "on 31 April 2023",
        "on 2023-13-01",
        # Two different days.
        "I moved on 2023-05-07 and started work on 2023-05-08.",
        "Yesterday I ran, and last Sunday I swam.",
        "Born 7 May 1990, married June 1, 2015.",
        # One readable date beside an ambiguous one.
        "Moved on 2023-05-07; lease signed 03/04/2023.",
        "Moved on 7 May 2023; party on June 3.",
        # Not dates: versions, ids, spans of time.
        "We use version 1.2.3 of the tool.",
        "Ticket 2023-05-07-abc is closed.",
        "Build 12023-05-07 failed.",
        "Over the last year I learned to cook.",
        "In the past week I slept badly.",
        "The last Tuesday of the month is book club.",
        "A few days ago I ran.",
        "Every Tuesday I swim.",
        # Far beyond the calendar.
        "9999 years ago the ice melted.",
    ],
)
def test_gives_nothing_when_the_text_is_not_one_clear_date(text: str) -> None:
    assert event_date(text, REF) is None


def test_relative_days_are_days_of_the_reference_at_its_own_offset() -> None:
    # 01:00 on 11 May at +02:00 is still 10 May in UTC; the caller's day is the 11th.
    reference = datetime(2023, 5, 11, 1, 0, tzinfo=timezone(timedelta(hours=2)))
    assert event_date("yesterday", reference) == day(2023, 5, 10)
    assert event_date("yesterday", reference.astimezone(UTC)) == day(2023, 5, 9)


def test_a_month_back_onto_a_shorter_month_is_its_last_day() -> None:
    assert event_date("last month", day(2023, 3, 31)) == day(2023, 2, 28)
    assert event_date("last year", day(2024, 2, 29)) == day(2023, 2, 28)
    assert event_date("2 months ago", day(2024, 4, 30)) == day(2024, 2, 29)


def test_a_naive_reference_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        event_date("yesterday", datetime(2023, 5, 10))


@given(st.text(max_size=200), st.datetimes(timezones=st.just(UTC)))
def test_any_text_gives_a_utc_instant_or_nothing(text: str, reference: datetime) -> None:
    found = event_date(text, reference)
    assert found is None or found.tzinfo is UTC
