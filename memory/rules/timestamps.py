"""RFC 3339 timestamps in and out of the tools (SUPPLEMENT §2).

In: an RFC 3339 date-time with an offset, anything else is ``INVALID_INPUT``
naming the field. Out: RFC 3339 in UTC with ``Z``. Pure: standard library
plus :mod:`memory.errors`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

from memory.errors import invalid

# RFC 3339 §5.6 "date-time". "T" may be lowercase or, per the note in §5.6, a
# space; fraction digits are unlimited. ASCII only: Python's \d would accept
# other scripts' digits.
_DATE_TIME = re.compile(
    r"(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})"
    r"[Tt ]"
    r"(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2}):(?P<second>[0-9]{2})"
    r"(?:\.(?P<fraction>[0-9]+))?"
    r"(?:(?P<utc>[Zz])|(?P<sign>[+-])(?P<off_hour>[0-9]{2}):(?P<off_minute>[0-9]{2}))",
    re.ASCII,
)


def parse_timestamp(value: object, *, field: str, keep_offset: bool = False) -> datetime:
    """Parse an RFC 3339 date-time with an offset into an aware UTC datetime.

    ``keep_offset``: the same instant at the offset it was given with, for the
    times whose day matters (``reference_time``, ``as_of``: "yesterday" is the
    caller's yesterday). It compares and stores like its UTC twin.

    Accepts "2026-05-17T14:00:00Z", "2026-05-17t14:00:00.5+02:00" and
    "2026-05-17 14:00:00-05:00". Surrounding whitespace is malformed like any
    other stray character (" 2026-05-17T14:00:00Z" is refused). Fractions
    beyond microseconds are truncated. A date alone, a missing offset, a
    leap second (":60", which datetime cannot hold), an impossible date or an
    instant outside years 1..9999 in UTC is ``INVALID_INPUT`` naming the field.
    """
    if isinstance(value, str):
        match = _DATE_TIME.fullmatch(value)
        if match is not None:
            try:
                instant = _to_utc(match)
                return instant.astimezone(_given_offset(match)) if keep_offset else instant
            except (ValueError, OverflowError):
                pass
    raise invalid(
        f"{field} must be an RFC 3339 date-time with a timezone offset, e.g. 2026-05-17T14:00:00Z.",
        field=field,
    )


def format_timestamp(dt: datetime | None) -> str | None:
    """RFC 3339 in UTC with ``Z``; None stays None.

    Whole seconds when there are no microseconds ("2026-05-05T12:00:00Z"),
    otherwise exactly six fraction digits ("2026-05-05T12:00:00.250000Z"), so
    :func:`parse_timestamp` gives back the same instant. A naive datetime is a
    programming error (storage hands back ``timestamptz``) and raises
    ``ValueError`` rather than being guessed at.
    """
    if dt is None:
        return None
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError("format_timestamp needs an aware datetime")
    utc = dt.astimezone(UTC).replace(tzinfo=None)
    timespec = "seconds" if utc.microsecond == 0 else "microseconds"
    return utc.isoformat(timespec=timespec) + "Z"


def _given_offset(match: re.Match[str]) -> timezone:
    """The offset a matched date-time was written with (valid: :func:`_to_utc` read it)."""
    if match["utc"]:
        return UTC
    offset = timedelta(hours=int(match["off_hour"]), minutes=int(match["off_minute"]))
    return timezone(-offset if match["sign"] == "-" else offset)


def _to_utc(match: re.Match[str]) -> datetime:
    """Build the datetime a regex match describes, converted to UTC.

    Raises ValueError for impossible fields (month 13, offset hour 24) and
    OverflowError when the UTC instant falls outside what datetime can hold.
    """
    if match["utc"]:
        offset = timedelta(0)
    else:
        # "-00:00" (RFC 3339 §4.3, offset unknown) is the same instant as "Z".
        hours, minutes = int(match["off_hour"]), int(match["off_minute"])
        if hours > 23 or minutes > 59:
            raise ValueError("offset out of range")
        offset = timedelta(hours=hours, minutes=minutes)
        if match["sign"] == "-":
            offset = -offset
    fraction = (match["fraction"] or "").ljust(6, "0")[:6]
    local = datetime(
        int(match["year"]),
        int(match["month"]),
        int(match["day"]),
        int(match["hour"]),
        int(match["minute"]),
        int(match["second"]),
        int(fraction),
        tzinfo=timezone(offset),
    )
    return local.astimezone(UTC)
