"""Time in a question: the span of time it asks about, and whether it wants the first or the latest.

Pure: standard library only. :func:`read_question` is what ``recall``,
``search_memory`` and ``build_context_prompt`` use (issue 17, "time in
queries"); everything resolves against ``as_of`` (the caller's, default now),
in the days of its own offset (a caller's ``-08:00`` evening is still that day;
a day's window runs from midnight UTC of that date, as stored dates do), and
every window is half-open, ``[start, end)``.

Spans (the first that matches wins, most specific first):

- ``before`` / ``prior to`` a date (up to its start), ``until`` / ``till``
  one (up to its end), ``after`` one (from its end) and ``since`` one (from
  its start): open on one side. The date is anything below (``before 2023``,
  ``since March 2021``, ``after 7 May 2023``, ``until last week``).
- a day: ISO dates, month-name dates with a year, ``today``, ``yesterday``,
  ``the day before yesterday``, ``last Tuesday``
  (:func:`memory.rules.event_dates.event_date` reads these);
- ``N days ago`` (that day), ``N weeks ago`` (the seven days around that day),
  ``N months ago`` and ``N years ago`` (that calendar month or year);
- a month with a year (``March 2023``, ``in Mar 2023``);
- ``last March`` (the latest March that ended before as_of's month),
  ``this March``, and ``in March`` / ``during March`` (the latest March that
  began on or before as_of);
- ``last`` / ``this`` / ``past`` ``week`` / ``month`` / ``year``: the calendar
  week (Monday first), month or year before as_of's, or as_of's own;
  ``the past week`` / ``month`` / ``year``: the seven days, 30 days or 365 days
  up to as_of;
- a year after ``in`` / ``during`` / ``of`` / ``from`` (``in 2023``); a bare
  year is not read ("my 2019 Honda" is a model year, not a time).

Anchors: ``before`` / ``after`` / ``since`` followed by something that is not
a date ("before my trip to Rome") is returned as an :class:`Anchor` for the
caller to place in time (the use case looks the phrase up among the memories).

Order: "first", "earliest", "initially", "originally" ask for the earliest;
"most recent", "latest", "last time", "recently", "lately", "currently",
"these days", "now" for the latest. "first name", "first aid", "at first
sight" and the like are not an order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from .event_dates import MONTH_NUMBER, MONTH_PATTERN, NUMBER_WORDS, event_date, midnight

_FLAGS = re.IGNORECASE | re.ASCII
_YEAR = r"(?P<year>(?:19|20)[0-9]{2})"
#: The months a lower-case word may also be ("may", "march"): read only when capitalised.
_WORD_MONTHS = frozenset({"may", "march"})


@dataclass(frozen=True)
class Window:
    """A span of time ``[start, end)`` in UTC; None leaves that side open.

    A calendar window (a day, a month, a year) runs between midnights UTC of the
    caller's dates, as stored dates do (a date is midnight UTC of its day). An
    instant (``created_at``, a time of day) is held to the caller's own midnights
    instead: ``local_start`` .. ``local_end``, the same dates at ``as_of``'s
    offset. For a window of instants ("the past week") and for a caller in UTC
    the two are the same.
    """

    start: datetime | None
    end: datetime | None
    #: The words of the question it was read from.
    said: str
    #: The bounds for instants (None: the same as ``start`` / ``end``).
    local_start: datetime | None = None
    local_end: datetime | None = None

    def holds(self, instant: datetime) -> bool:
        """Whether ``instant`` falls inside the window (a date by its day, an instant by the
        caller's clock)."""
        start, end = (self.start, self.end) if _is_date(instant) else self._local()
        return (start is None or instant >= start) and (end is None or instant < end)

    def overlaps(self, start: datetime | None, end: datetime | None) -> bool:
        """Whether the span ``[start, end]`` (None: open) meets the window, read either way."""
        lo, hi = self.widest()
        return (hi is None or start is None or start < hi) and (
            lo is None or end is None or end >= lo
        )

    def widest(self) -> tuple[datetime | None, datetime | None]:
        """The bounds holding both readings: what a search for the window's rows reads."""
        local_start, local_end = self._local()
        lo = None if self.start is None or local_start is None else min(self.start, local_start)
        hi = None if self.end is None or local_end is None else max(self.end, local_end)
        return lo, hi

    def _local(self) -> tuple[datetime | None, datetime | None]:
        return (
            self.start if self.local_start is None else self.local_start,
            self.end if self.local_end is None else self.local_end,
        )


def _is_date(instant: datetime) -> bool:
    """A stored date: midnight UTC (``event_dates`` stores a day so)."""
    utc = instant.astimezone(UTC)
    return not (utc.hour or utc.minute or utc.second or utc.microsecond)


def _for_caller(window: Window, as_of: datetime) -> Window:
    """``window`` with the bounds instants are held to: its dates' midnights at ``as_of``'s
    offset (unchanged for a caller in UTC and for a window of instants)."""
    offset = as_of.utcoffset() or timedelta(0)
    if not offset or window.local_start is not None or window.local_end is not None:
        return window
    return replace(
        window,
        local_start=None if window.start is None else window.start - offset,
        local_end=None if window.end is None else window.end - offset,
    )


@dataclass(frozen=True)
class Anchor:
    """``before`` or ``after`` something the question names but does not date."""

    side: str  # "before" | "after"
    phrase: str


@dataclass(frozen=True)
class QuestionTime:
    """What a question says about time."""

    window: Window | None = None
    #: "earliest", "latest" or None.
    order: str | None = None
    anchor: Anchor | None = None

    @property
    def empty(self) -> bool:
        return self.window is None and self.order is None and self.anchor is None


def _month_start(year: int, month: int) -> datetime:
    return datetime(year, month, 1, tzinfo=UTC)


def _month_window(year: int, month: int, said: str) -> Window | None:
    if not 1 <= year <= 9998:
        return None
    nxt = (year + 1, 1) if month == 12 else (year, month + 1)
    return Window(_month_start(year, month), _month_start(*nxt), said)


def _year_window(year: int, said: str) -> Window | None:
    if not 1 <= year <= 9998:
        return None
    return Window(_month_start(year, 1), _month_start(year + 1, 1), said)


def _shift_months(year: int, month: int, by: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + by
    return index // 12, index % 12 + 1


# --- spans -------------------------------------------------------------------

_SIDE = re.compile(
    # "the day before yesterday" is a day, read by event_dates, not "before yesterday".
    r"\b(?<!day )(?P<side>before|until|till|prior\s+to|after|since)\s+(?P<rest>[^?.!,;]+)",
    _FLAGS,
)
_MONTH_YEAR = re.compile(r"(?<![0-9A-Za-z])" + MONTH_PATTERN + r",?\s+" + _YEAR + r"\b", _FLAGS)
_NAMED_MONTH = re.compile(
    r"\b(?P<which>last|this|in|during)\s+" + MONTH_PATTERN + r"(?![A-Za-z0-9])(?!\s+[0-9])", _FLAGS
)
_CALENDAR = re.compile(
    r"\b(?P<the>the\s+)?(?P<which>last|this|past|previous)\s+(?P<unit>week|month|year)\b"
    r"(?!\s+of\b)",
    _FLAGS,
)
_AGO = re.compile(
    r"(?<![0-9A-Za-z])(?P<count>[0-9]{1,3}|" + "|".join(NUMBER_WORDS) + r")\s+"
    r"(?P<unit>day|week|month|year)s?\s+ago\b",
    _FLAGS,
)
_IN_YEAR = re.compile(r"\b(?:in|during|of|from)\s+(?:the\s+year\s+)?" + _YEAR + r"\b", _FLAGS)
_BARE_YEAR = re.compile(r"^\s*(?:the\s+year\s+)?" + _YEAR + r"\b", _FLAGS)


def _calendar(m: re.Match[str], as_of: datetime) -> Window | None:
    unit, which = m["unit"].lower(), m["which"].lower()
    today = as_of.date()
    said = m.group(0)
    if which == "past" or (m["the"] and which == "last"):
        # "the past month", "the last year": a rolling span up to now.
        days = {"week": 7, "month": 30, "year": 365}[unit]
        now = as_of.astimezone(UTC)  # out of range near year 1: no window, not an error later
        start = now - timedelta(days=days)
        return Window(start, now, said, local_start=start, local_end=now)
    back = 0 if which == "this" else 1
    if unit == "week":
        monday = today - timedelta(days=today.weekday() + 7 * back)
        return Window(midnight(monday), midnight(monday + timedelta(days=7)), said)
    if unit == "month":
        year, month = _shift_months(today.year, today.month, -back)
        return _month_window(year, month, said)
    return _year_window(today.year - back, said)


def _named_month(m: re.Match[str], as_of: datetime) -> Window | None:
    if m["month"].lower() in _WORD_MONTHS and not m["month"][0].isupper():
        return None  # "this may sound odd", "in march order": words, not months
    month = MONTH_NUMBER[m["month"].lower()]
    which = m["which"].lower()
    today = as_of.date()
    year = today.year
    if which == "this":
        return _month_window(year, month, m.group(0))
    if which == "last":
        # The latest such month wholly before as_of's month.
        if month >= today.month:
            year -= 1
    elif month > today.month:
        # "in March": the latest March that has begun.
        year -= 1
    return _month_window(year, month, m.group(0))


def _ago(m: re.Match[str], as_of: datetime) -> Window | None:
    raw = m["count"].lower()
    count = NUMBER_WORDS[raw] if raw in NUMBER_WORDS else int(raw)
    unit = m["unit"].lower()
    today = as_of.date()
    said = m.group(0)
    try:
        if unit == "day":
            day = today - timedelta(days=count)
            return Window(midnight(day), midnight(day + timedelta(days=1)), said)
        if unit == "week":
            day = today - timedelta(days=7 * count)
            return Window(
                midnight(day - timedelta(days=3)), midnight(day + timedelta(days=4)), said
            )
    except OverflowError:
        return None
    if unit == "month":
        return _month_window(*_shift_months(today.year, today.month, -count), said)
    return _year_window(today.year - count, said)


def _read_span(text: str, as_of: datetime) -> Window | None:
    """The span ``text`` names, most specific reading first; None if it names none."""
    # Spans before days: event_dates reads "two weeks ago" and "last month" as one day.
    m = _AGO.search(text)
    if m:
        return _ago(m, as_of)
    m = _CALENDAR.search(text)
    if m:
        return _calendar(m, as_of)
    day = event_date(text, as_of)
    if day is not None:
        if day.hour or day.minute or day.second:  # an instant: its day
            day = midnight(day.date())
        return Window(day, day + timedelta(days=1), day.date().isoformat())
    m = _MONTH_YEAR.search(text)
    if m:
        return _month_window(int(m["year"]), MONTH_NUMBER[m["month"].lower()], m.group(0))
    m = _NAMED_MONTH.search(text)
    if m:
        return _named_month(m, as_of)
    m = _IN_YEAR.search(text) or _BARE_YEAR.search(text)
    if m:
        return _year_window(int(m["year"]), m.group(0).strip())
    return None


# --- order -------------------------------------------------------------------

_NOT_ORDER = re.compile(
    r"\bfirst\s+(?:name|aid|class|language|floor|person|date|impression|sight|of\s+all)\b"
    r"|\bat\s+first\s+sight\b|\blast\s+name\b",
    _FLAGS,
)
_EARLIEST = re.compile(r"\b(?:first|earliest|initially|originally|at\s+the\s+start)\b", _FLAGS)
_LATEST = re.compile(
    r"\b(?:most\s+recent(?:ly)?|latest|last\s+time|recently|lately|currently|these\s+days"
    r"|right\s+now|now|newest)\b",
    _FLAGS,
)


def _order(question: str) -> str | None:
    text = _NOT_ORDER.sub(" ", question)
    earliest, latest = _EARLIEST.search(text), _LATEST.search(text)
    if earliest and not latest:
        return "earliest"
    if latest and not earliest:
        return "latest"
    return None


# --- the question ------------------------------------------------------------

#: An undated anchor is a noun phrase ("my trip to Rome", "the wedding"), not a clause
#: ("since I'm vegetarian", "since we fly in June": a reason, not a time).
_ANCHOR_START = re.compile(r"^(?:my|our|the|his|her|their)\b", _FLAGS)
#: What a date after before/after/since/until starts with: a clause that merely holds a
#: date later on ("since we fly to Rome in June") is no bound.
_DATE_START = re.compile(
    r"^\s*(?:the\s+)?(?:[0-9]|last\b|this\b|past\b|previous\b|yesterday\b|today\b|"
    + MONTH_PATTERN
    + r"|(?:"
    + "|".join(NUMBER_WORDS)
    + r")\s+(?:day|week|month|year)s?\s+ago\b)",
    _FLAGS,
)


def read_question(question: str, as_of: datetime) -> QuestionTime:
    """What ``question`` says about time, against ``as_of`` (an aware datetime)."""
    if as_of.tzinfo is None or as_of.utcoffset() is None:
        raise ValueError("read_question needs an aware as_of")
    # Kept at the caller's offset: "yesterday" and "this month" are the caller's days
    # (Window: stored dates by their day, instants by the caller's midnights).
    order = _order(question)
    side = _SIDE.search(question)
    if side:
        word = " ".join(side["side"].lower().split())
        span = _span(side["rest"], as_of) if _DATE_START.match(side["rest"]) else None
        if span is not None:
            said = side.group(0).strip()
            # Each bound is the span's, with its reading for instants.
            if word in ("before", "prior to"):
                window = Window(None, span.start, said, local_end=span.local_start)
            elif word in ("until", "till"):
                window = Window(None, span.end, said, local_end=span.local_end)
            elif word == "after":
                window = Window(span.end, None, said, local_start=span.local_end)
            else:  # since
                window = Window(span.start, None, said, local_start=span.local_start)
            return QuestionTime(window, order)
        phrase = side["rest"].strip()
        if _ANCHOR_START.match(phrase):
            later = word in ("after", "since")
            return QuestionTime(None, order, Anchor("after" if later else "before", phrase))
    return QuestionTime(_span(question, as_of), order)


def _span(text: str, as_of: datetime) -> Window | None:
    """The span ``text`` names (:func:`_read_span`); none at the calendar's ends."""
    try:
        window = _read_span(text, as_of)
        return None if window is None else _for_caller(window, as_of)
    except (OverflowError, ValueError):
        return None  # "on 9999-12-31", "last week" as of year 1: off the calendar


# --- what it does to ranking ---------------------------------------------------

#: Added to a candidate's relevance (cosine + lexical share, :mod:`memory.rules.ranking`)
#: when its fact falls in the question's window: about the gap between a good match
#: and a loose one, so an in-window fact that matches the question loosely outranks
#: an out-of-window one that matches it well, but not one that does not match at all.
WINDOW_WEIGHT = 0.3
#: An "earliest" / "latest" question: among the candidates whose relevance is within
#: this of the best one's (the ones about the thing asked), the first (or latest) in
#: time gets as much added, so it leads them; the others keep their order.
ORDER_MARGIN = 0.3
#: ... provided their times span at least this much.
ORDER_SPREAD = timedelta(days=1)


@dataclass(frozen=True)
class EventTime:
    """When a candidate's fact happened or held (a memory's event-time fields)."""

    occurred_at: datetime | None
    valid_from: datetime | None
    valid_to: datetime | None
    #: When it was stored: the fact's time when it says nothing else.
    created_at: datetime

    @property
    def instant(self) -> datetime:
        """One point in time for ordering: occurred_at, else valid_from, else created_at."""
        return self.occurred_at or self.valid_from or self.created_at

    @property
    def has_span(self) -> bool:
        return self.valid_from is not None or self.valid_to is not None


def visible(t: EventTime, when: QuestionTime, as_of: datetime) -> bool:
    """Whether a fact may be recalled for this question at ``as_of``.

    A fact with a validity span is hidden when the span misses the question's
    window, or, when the question names none, when it does not hold at
    ``as_of`` (it starts later or has ended). Facts without a span are always
    visible.
    """
    if not t.has_span:
        return True
    if when.window is not None:
        return when.window.overlaps(t.valid_from, t.valid_to)
    return (t.valid_from is None or t.valid_from <= as_of) and (
        t.valid_to is None or t.valid_to >= as_of
    )


def in_window(t: EventTime, window: Window) -> bool:
    """Whether the fact happened (or held) inside ``window``."""
    if t.has_span:
        return window.overlaps(t.valid_from, t.valid_to)
    return window.holds(t.occurred_at or t.created_at)


def time_scores(
    times: dict[int, EventTime], when: QuestionTime, relevance: dict[int, float]
) -> dict[int, float]:
    """What the question's time adds to each candidate's relevance (0 when it says nothing).

    ``relevance``: each candidate's relevance before time (cosine + lexical share).
    """
    out = dict.fromkeys(times, 0.0)
    if when.window is not None:
        for key, t in times.items():
            if in_window(t, when.window):
                out[key] += WINDOW_WEIGHT
    if when.order is not None and times:
        scored = {k: relevance[k] + out[k] for k in times}
        best = max(scored.values())
        about = [k for k in times if scored[k] >= best - ORDER_MARGIN]
        instants = [times[k].instant for k in about]
        # Facts all told within a day (an import, a batch) have no order worth trusting:
        # their stored times say when they were written down, not what came first.
        if max(instants) - min(instants) >= ORDER_SPREAD:
            pick = min if when.order == "earliest" else max
            out[pick(about, key=lambda k: times[k].instant)] += ORDER_MARGIN
    return out
