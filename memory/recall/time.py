"""Recall's time step: what the question says about time, and what that does to candidates.

The question is read by :func:`memory.rules.query_time.read_question` against
``as_of`` (the caller's, default now). An undated "before my trip to Rome" is
placed in time here: the memory that best holds the phrase's words (the
lexical side of recall) gives its event time. A window then brings in its own
candidates (the rows of that time nearest the query, beside the usual nearest
rows), adds to the relevance of the candidates inside it, and hides facts whose
validity span misses it; with no window, facts that do not hold at ``as_of``
are hidden. "first" / "latest" add to the relevance by event time.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from psycopg import AsyncConnection

from memory.rules import query_time, ranking
from storage import memories as store
from storage.rows import MemoryRow

from . import lexical


async def read(
    conn: AsyncConnection, user_id: int, question: str, as_of: datetime
) -> query_time.QuestionTime:
    """The question's time, an anchor placed in time when the store names it."""
    when = query_time.read_question(question, as_of)
    if when.anchor is None:
        return when
    ids = (await lexical.lexical_side(conn, user_id, when.anchor.phrase, candidates=1)).ids
    row = await store.get_memory(conn, user_id, ids[0]) if ids else None
    if row is None:
        return replace(when, anchor=None)
    instant = event_time(row).instant
    said = f"{when.anchor.side} {when.anchor.phrase}"
    if when.anchor.side == "before":
        window = query_time.Window(None, instant, said)
    elif instant < datetime.max.replace(tzinfo=instant.tzinfo):
        # After the anchor's own moment: the anchor itself is not "after" it.
        window = query_time.Window(instant + timedelta(microseconds=1), None, said)
    else:
        return replace(when, anchor=None)  # nothing comes after the end of the calendar
    return query_time.QuestionTime(window, when.order, None)


async def window_ids(
    conn: AsyncConnection,
    user_id: int,
    embedded: object,
    when: query_time.QuestionTime,
    *,
    limit: int,
    tags: list[str],
) -> list[int]:
    """The nearest rows of the question's window (none without one)."""
    if when.window is None:
        return []
    start, end = when.window.widest()  # its dates and its instants both
    return await store.window_candidates(
        conn,
        user_id,
        embedded,
        start=start,
        end=end,
        candidates=ranking.lexical_candidate_count(limit),
        tags=tags,
    )


def event_time(row: MemoryRow) -> query_time.EventTime:
    return query_time.EventTime(row.occurred_at, row.valid_from, row.valid_to, row.created_at)
