"""Unit tests for memory.rules.timestamps: strict RFC 3339 in, UTC "Z" out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.errors import INVALID_INPUT, MemoryServiceError
from memory.rules.timestamps import format_timestamp, parse_timestamp

UTC = UTC


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-05-17T14:00:00Z", datetime(2026, 5, 17, 14, tzinfo=UTC)),
        ("2026-05-17t14:00:00z", datetime(2026, 5, 17, 14, tzinfo=UTC)),
        ("2026-05-17 14:00:00Z", datetime(2026, 5, 17, 14, tzinfo=UTC)),
        ("2026-05-17T14:00:00+02:00", datetime(2026, 5, 17, 12, tzinfo=UTC)),
        ("2026-05-17T14:00:00-05:30", datetime(2026, 5, 17, 19, 30, tzinfo=UTC)),
        ("2026-05-17T14:00:00-00:00", datetime(2026, 5, 17, 14, tzinfo=UTC)),
        ("2026-05-17T14:00:00.123+02:00", datetime(2026, 5, 17, 12, 0, 0, 123000, tzinfo=UTC)),
        ("2026-05-17T14:00:00.1234567891Z", datetime(2026, 5, 17, 14, 0, 0, 123456, tzinfo=UTC)),
        ("2026-01-01T00:30:00+01:00", datetime(2025, 12, 31, 23, 30, tzinfo=UTC)),
        ("2024-02-29T00:00:00Z", datetime(2024, 2, 29, tzinfo=UTC)),
    ],
)
def test_parse_timestamp(text: str, expected: datetime) -> None:
    parsed = parse_timestamp(text, field="expires_at")
    assert parsed == expected
    assert parsed.tzinfo is UTC


@pytest.mark.parametrize(
    "value",
    [
        "2026-05-17",
        "2026-05-17T14:00:00",  # no offset
        "2026-05-17T14:00Z",  # no seconds
        "2026-05-17T14:00:00+0200",
        "2026-05-17T14:00:00+02",
        "20260517T140000Z",
        "2026-13-01T00:00:00Z",
        "2026-02-29T00:00:00Z",  # not a leap year
        "2026-05-17T24:00:00Z",
        "2026-05-17T14:60:00Z",
        "2026-05-17T14:00:60Z",  # leap second: datetime cannot hold it
        "2026-05-17T14:00:00+24:00",
        "2026-05-17T14:00:00+02:60",
        "2026-05-17T14:00:00.Z",
        "２０２６-05-17T14:00:00Z",  # non-ASCII digits
        "0001-01-01T00:00:00+01:00",  # before year 1 in UTC
        "9999-12-31T23:59:59-01:00",  # after year 9999 in UTC
        # Surrounding whitespace is a stray character like any other (issue 12).
        " 2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00Z ",
        "  2026-05-17T14:00:00Z\n",
        "2026-05-17T14:00:00Z\n",
        "\t2026-05-17T14:00:00Z",
        "",
        "now",
        "yesterday at noon",
        None,
        1747490400,
        17.5,
        True,
        datetime(2026, 5, 17, tzinfo=UTC),
    ],
)
def test_parse_timestamp_rejects(value: object) -> None:
    with pytest.raises(MemoryServiceError) as excinfo:
        parse_timestamp(value, field="verified_at")
    error = excinfo.value
    assert error.code == INVALID_INPUT
    assert error.message == (
        "verified_at must be an RFC 3339 date-time with a timezone offset,"
        " e.g. 2026-05-17T14:00:00Z."
    )
    assert error.detail == {"field": "verified_at"}


@pytest.mark.parametrize(
    ("dt", "expected"),
    [
        (None, None),
        (datetime(2026, 5, 5, 12, tzinfo=UTC), "2026-05-05T12:00:00Z"),
        (datetime(2026, 5, 5, 12, 0, 0, 250000, tzinfo=UTC), "2026-05-05T12:00:00.250000Z"),
        (datetime(2026, 5, 5, 12, 0, 0, 1, tzinfo=UTC), "2026-05-05T12:00:00.000001Z"),
        (
            datetime(2026, 5, 5, 1, 30, tzinfo=timezone(timedelta(hours=2))),
            "2026-05-04T23:30:00Z",
        ),
        (datetime(1, 1, 1, tzinfo=UTC), "0001-01-01T00:00:00Z"),
    ],
)
def test_format_timestamp(dt: datetime | None, expected: str | None) -> None:
    assert format_timestamp(dt) == expected


def test_parse_timestamp_can_keep_the_offset_it_was_given() -> None:
    kept = parse_timestamp("2026-12-04T20:00:00-08:00", field="as_of", keep_offset=True)
    assert kept.utcoffset() == timedelta(hours=-8) and kept.date().day == 4
    assert kept == datetime(2026, 12, 5, 4, 0, tzinfo=UTC)  # the same instant
    assert format_timestamp(kept) == "2026-12-05T04:00:00Z"
    assert parse_timestamp("2026-12-04T20:00:00Z", field="t", keep_offset=True).tzinfo == UTC


def test_format_timestamp_refuses_naive_datetimes() -> None:
    with pytest.raises(ValueError):
        format_timestamp(datetime(2026, 5, 5, 12))


_OFFSETS = st.builds(lambda minutes: timezone(timedelta(minutes=minutes)), st.integers(-1439, 1439))


@given(
    st.datetimes(
        min_value=datetime(2, 1, 1),
        max_value=datetime(9998, 12, 31),
        timezones=_OFFSETS,
    )
)
def test_round_trip(dt: datetime) -> None:
    text = format_timestamp(dt)
    assert text is not None
    parsed = parse_timestamp(text, field="created_at")
    assert parsed == dt
    assert parsed.tzinfo is UTC
    assert format_timestamp(parsed) == text
