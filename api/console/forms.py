"""Reading the console's form and query values that every page shares."""

from __future__ import annotations


def positive_id(raw: str | None) -> int | None:
    """A memory (or row) id as a form or query sends it: ASCII digits, above 0, fitting a
    bigint; None for anything else ("-3", "٣", "1e3", an empty value)."""
    text = (raw or "").strip()
    if not (text.isascii() and text.isdigit() and 0 < len(text) < 19):
        return None
    value = int(text)
    return value if value > 0 else None
