"""Event time on writes (issue 17): ``occurred_at``, ``valid_from``, ``valid_to``, read and checked.

The three are optional RFC 3339 timestamps like the others (SUPPLEMENT §2) and
may lie in the past or the future (a plan has a date too). ``valid_from`` after
``valid_to`` is ``INVALID_INPUT``. When no ``occurred_at`` is given, a date the
text states unambiguously is read (:mod:`memory.rules.event_dates`), counting
relative ones ("last Tuesday") from ``reference_time`` or the time of storing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memory.errors import invalid
from memory.rules.event_dates import event_date
from memory.rules.inputs import Args
from memory.rules.timestamps import parse_timestamp

#: The event-time fields a write takes, in the order changed_fields lists them.
EVENT_FIELDS = ("occurred_at", "valid_from", "valid_to")


@dataclass(frozen=True)
class EventTime:
    """What a new memory stores of its event time."""

    occurred_at: datetime | None
    valid_from: datetime | None
    valid_to: datetime | None
    #: occurred_at was read from the text (no caller gave it).
    occurred_at_parsed: bool


def optional_time(args: Args, name: str, *, keep_offset: bool = False) -> datetime | None:
    """An optional timestamp argument; null or absent is None."""
    if not args.has(name):
        return None
    return parse_timestamp(args.raw(name), field=name, keep_offset=keep_offset)


def check_span(valid_from: datetime | None, valid_to: datetime | None, *, field: str) -> None:
    """``valid_from`` after ``valid_to`` (both set) is INVALID_INPUT naming ``field``."""
    if valid_from is not None and valid_to is not None and valid_from > valid_to:
        raise invalid(
            "valid_from is after valid_to; the span a fact holds for must not end before it "
            "starts.",
            field=field,
        )


def new_event_time(args: Args, text: str, *, now: datetime) -> EventTime:
    """The event time of a remembered ``text``: as given, else its date read from the text."""
    occurred = optional_time(args, "occurred_at")
    valid_from = optional_time(args, "valid_from")
    valid_to = optional_time(args, "valid_to")
    check_span(valid_from, valid_to, field="valid_from")
    # At the caller's offset: relative dates count in the caller's days.
    reference = optional_time(args, "reference_time", keep_offset=True)
    if occurred is not None:
        return EventTime(occurred, valid_from, valid_to, occurred_at_parsed=False)
    parsed = event_date(text, reference or now)
    return EventTime(parsed, valid_from, valid_to, occurred_at_parsed=parsed is not None)


def event_changes(args: Args) -> dict[str, datetime | None]:
    """The event-time fields an update sets: a timestamp, or null to clear it."""
    changes: dict[str, datetime | None] = {}
    for name in EVENT_FIELDS:
        if args.present(name):
            value = args.raw(name)
            changes[name] = None if value is None else parse_timestamp(value, field=name)
    field = "valid_from" if "valid_from" in changes else "valid_to"
    check_span(changes.get("valid_from"), changes.get("valid_to"), field=field)
    return changes
