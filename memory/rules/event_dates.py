"""When a memory's fact happened, read from its text where the text says so unambiguously.

Pure: standard library only. :func:`event_date` is what ``remember`` and
``update_memory`` use when the caller gives no ``occurred_at`` (issue 17).

What is read (case-insensitive), each to one instant in UTC:

- ISO dates: ``2023-05-07``, with an optional time ``2023-05-07T14:30``,
  ``2023-05-07 14:30:05``, ``2023-05-07T14:30:00+02:00`` (a time without an
  offset is UTC);
- month-name dates with a year: ``7 May 2023``, ``[7 May 2023]``,
  ``7th of May 2023``, ``7 May, 2023``, ``May 7, 2023``, ``May 7th 2023``,
  ``Sept. 7 2023`` (full names and three-letter abbreviations, ``Sept``);
- relative to a reference instant (the caller's ``reference_time``, else
  the time of storing): ``today``, ``yesterday``, ``the day before
  yesterday``, ``last Tuesday`` (the latest Tuesday strictly before the
  reference's day: on a Tuesday, a week before), ``3 days ago``, ``two
  weeks ago``, ``a month ago``, ``ten years ago`` (digits, or the number
  words a/an/one to twenty, thirty, forty, fifty), and ``last week`` /
  ``last month`` / ``last year``, which are the same day one week, one
  month or one year before the reference's day (a month or year moved onto
  a day that does not exist, 31 March to February, is that month's last
  day).

A date without a time is midnight UTC of that day; relative days are days
of the reference instant at its own offset (a caller's ``reference_time`` of
``2026-12-04T20:00:00-08:00`` makes "yesterday" 3 December, although the instant
is 5 December in UTC). Nothing is guessed: numeric dates whose
order is unknown (``03/04/2023``, ``3.4.2023``), a month-name date without a
year (``on May 7``, ``7 May``), a month and year with no day (``May 2023``)
and impossible dates (``2023-02-30``) give no date; and a text that names
two different days, or one readable date beside an ambiguous one, gives no
date either. The same day named twice is that day.
"""

from __future__ import annotations

import re
from calendar import monthrange
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta, timezone

_MONTHS = {
    "january": 1,
    "february": 2,
    "march": 3,
    "april": 4,
    "may": 5,
    "june": 6,
    "july": 7,
    "august": 8,
    "september": 9,
    "october": 10,
    "november": 11,
    "december": 12,
}
MONTH_NUMBER = {
    **_MONTHS,
    **{name[:3]: n for name, n in _MONTHS.items()},
    "sept": 9,
}
MONTH_PATTERN = r"(?P<month>" + "|".join(sorted(MONTH_NUMBER, key=len, reverse=True)) + r")\.?"
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
}
_ORDINAL = r"(?:st|nd|rd|th)?"
#: Reads one mention (a match) as a day, counting from the reference's day.
_Resolver = Callable[[re.Match[str], date], datetime | None]
# ASCII only: Python's \d would accept other scripts' digits.
_FLAGS = re.IGNORECASE | re.ASCII

_ISO = re.compile(
    r"(?<![0-9A-Za-z./-])(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})"
    r"(?:[T ](?P<hour>[0-9]{2}):(?P<minute>[0-9]{2})(?::(?P<second>[0-9]{2})(?:\.[0-9]+)?)?"
    r"(?P<offset>Z|[+-][0-9]{2}:?[0-9]{2})?)?"
    r"(?![0-9A-Za-z/-]|\.[0-9])",
    _FLAGS,
)
_DAY_MONTH_YEAR = re.compile(
    r"(?<![0-9A-Za-z])(?P<day>[0-9]{1,2})"
    + _ORDINAL
    + r"(?:\s+of)?\s+"
    + MONTH_PATTERN
    + r",?\s+(?P<year>[0-9]{4})(?![0-9A-Za-z])",
    _FLAGS,
)
_MONTH_DAY_YEAR = re.compile(
    r"(?<![0-9A-Za-z])"
    + MONTH_PATTERN
    + r"\s+(?P<day>[0-9]{1,2})"
    + _ORDINAL
    + r",?\s+(?P<year>[0-9]{4})(?![0-9A-Za-z])",
    _FLAGS,
)
_DAY_BEFORE_YESTERDAY = re.compile(r"\b(?:the\s+)?day\s+before\s+yesterday\b", _FLAGS)
_YESTERDAY = re.compile(r"\byesterday\b", _FLAGS)
_TODAY = re.compile(r"\btoday\b", _FLAGS)
# "the last week" is a span of time, not a day.
_LAST_WEEKDAY = re.compile(
    r"(?<!the )\blast\s+(?P<weekday>" + "|".join(WEEKDAYS) + r")\b(?!\s+of\b)", _FLAGS
)
_LAST_SPAN = re.compile(
    r"(?<!the )(?<!this )(?<!past )\blast\s+(?P<unit>week|month|year)\b(?!\s+of\b)", _FLAGS
)
_AGO = re.compile(
    r"(?<![0-9A-Za-z])(?P<count>[0-9]{1,4}|" + "|".join(NUMBER_WORDS) + r")\s+"
    r"(?P<unit>day|week|month|year)s?\s+ago\b",
    _FLAGS,
)

# Date-like mentions that say no one day: their presence makes the text ambiguous.
_AMBIGUOUS = (
    # 03/04/2023, 3.4.23, 03-04-2023: day-month or month-day, unknown.
    re.compile(
        r"(?<![0-9A-Za-z.])[0-9]{1,2}[/.-][0-9]{1,2}[/.-][0-9]{2,4}(?![0-9A-Za-z]|\.[0-9])",
        _FLAGS,
    ),
    # "7 May", "7th of May" and "May 7", "May 7th" without a year.
    re.compile(
        r"(?<![0-9A-Za-z])[0-9]{1,2}"
        + _ORDINAL
        + r"(?:\s+of)?\s+"
        + MONTH_PATTERN.replace("(?P<month>", "(?:")
        + r"(?![A-Za-z])",
        _FLAGS,
    ),
    re.compile(
        r"(?<![0-9A-Za-z])"
        + MONTH_PATTERN.replace("(?P<month>", "(?:")
        + r"\s+[0-9]{1,2}"
        + _ORDINAL
        + r"(?![0-9A-Za-z:])",
        _FLAGS,
    ),
)


def event_date(text: str, reference: datetime) -> datetime | None:
    """The one day (or instant) ``text`` says its fact happened on, or None.

    ``reference`` (an aware datetime) is what relative expressions count
    from. See the module docstring for what is read and what is refused.
    """
    if reference.tzinfo is None or reference.utcoffset() is None:
        raise ValueError("event_date needs an aware reference datetime")
    today = reference.date()  # the reference's own day, at the offset it was given with
    found: list[datetime] = []
    taken: list[tuple[int, int]] = []
    for pattern, resolve in _READERS:
        for match in pattern.finditer(text):
            span = match.span()
            if any(span[0] < end and start < span[1] for start, end in taken):
                continue  # part of a longer mention already read
            taken.append(span)
            value = resolve(match, today)
            if value is None:
                return None  # a date-shaped mention that is no date: say nothing
            found.append(value)
    if not found or len(set(found)) > 1:
        return None
    rest = _blank(text, taken)
    if any(pattern.search(rest) for pattern in _AMBIGUOUS):
        return None
    return found[0]


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the ``spans`` already read replaced by spaces."""
    chars = list(text)
    for start, end in spans:
        chars[start:end] = " " * (end - start)
    return "".join(chars)


def midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _day(year: int, month: int, day: int) -> datetime | None:
    try:
        return midnight(date(year, month, day))
    except ValueError:
        return None


def _iso(match: re.Match[str], _today: date) -> datetime | None:
    base = _day(int(match["year"]), int(match["month"]), int(match["day"]))
    if base is None or match["hour"] is None:
        return base
    hour, minute, second = int(match["hour"]), int(match["minute"]), int(match["second"] or 0)
    offset = timedelta(0)
    raw = match["offset"]
    if raw and raw.upper() != "Z":
        digits = raw[1:].replace(":", "")
        off_h, off_m = int(digits[:2]), int(digits[2:])
        if off_h > 23 or off_m > 59:
            return None
        offset = timedelta(hours=off_h, minutes=off_m) * (-1 if raw[0] == "-" else 1)
    try:
        local = datetime(
            base.year, base.month, base.day, hour, minute, second, tzinfo=timezone(offset)
        )
        return local.astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def _named(match: re.Match[str], _today: date) -> datetime | None:
    month = MONTH_NUMBER[match["month"].lower()]
    return _day(int(match["year"]), month, int(match["day"]))


def _days_back(days: int) -> _Resolver:
    def resolve(_match: re.Match[str], today: date) -> datetime | None:
        return _minus(today, days=days)

    return resolve


def _last_weekday(match: re.Match[str], today: date) -> datetime | None:
    wanted = WEEKDAYS.index(match["weekday"].lower())
    back = (today.weekday() - wanted - 1) % 7 + 1  # 1..7: strictly before today
    return _minus(today, days=back)


def _last_span(match: re.Match[str], today: date) -> datetime | None:
    unit = match["unit"].lower()
    if unit == "week":
        return _minus(today, days=7)
    return _minus(today, months=12 if unit == "year" else 1)


def _ago(match: re.Match[str], today: date) -> datetime | None:
    raw = match["count"].lower()
    count = NUMBER_WORDS[raw] if raw in NUMBER_WORDS else int(raw)
    unit = match["unit"].lower()
    if unit == "day":
        return _minus(today, days=count)
    if unit == "week":
        return _minus(today, days=7 * count)
    return _minus(today, months=count * (12 if unit == "year" else 1))


def _minus(today: date, *, days: int = 0, months: int = 0) -> datetime | None:
    """``today`` moved back; a month that lacks the day gives its last day; None off the calendar."""
    try:
        if months:
            index = today.year * 12 + today.month - 1 - months
            year, month = divmod(index, 12)
            month += 1
            if year < 1:
                return None
            today = date(year, month, min(today.day, monthrange(year, month)[1]))
        return midnight(today - timedelta(days=days))
    except (ValueError, OverflowError):
        return None


#: Most specific first: a span read by one is not read again by a later one.
_READERS = (
    (_ISO, _iso),
    (_DAY_MONTH_YEAR, _named),
    (_MONTH_DAY_YEAR, _named),
    (_DAY_BEFORE_YESTERDAY, _days_back(2)),
    (_YESTERDAY, _days_back(1)),
    (_TODAY, _days_back(0)),
    (_LAST_WEEKDAY, _last_weekday),
    (_LAST_SPAN, _last_span),
    (_AGO, _ago),
)
