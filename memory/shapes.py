"""How rows look on the wire. Vectors never leave; timestamps are RFC 3339 UTC."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memory.rules.query_time import Window
from memory.rules.ranking import Explanation
from memory.rules.timestamps import format_timestamp
from storage.rows import MemoryRow, shape_fields


def _learning(row: MemoryRow, out: dict[str, Any]) -> None:
    out["salience"] = round(row.salience, 6)
    out["use_count"] = row.use_count
    if row.context_count:
        out["context_count"] = row.context_count


def match_shape(row: MemoryRow, score: float | None = None) -> dict[str, Any]:
    """The row shape of recall matches, listings and text search."""
    out: dict[str, Any] = {"id": row.id, "text": row.text}
    if score is not None:
        out["score"] = round(score, 4)
    out.update(
        created_at=format_timestamp(row.created_at),
        updated_at=format_timestamp(row.updated_at),
        last_confirmed_at=format_timestamp(row.last_confirmed_at),
        tags=list(row.tags),
        source_provider=row.source_provider,
        capture_mode=row.capture_mode,
        importance=row.importance,
        keep=row.keep,
    )
    if row.expires_at is not None:
        out["expires_at"] = format_timestamp(row.expires_at)
    # Event time (issue 17), each only when set, like expires_at.
    for name in ("occurred_at", "valid_from", "valid_to"):
        value = getattr(row, name)
        if value is not None:
            out[name] = format_timestamp(value)
    if row.deleted_at is not None:
        out["deleted_at"] = format_timestamp(row.deleted_at)
        out["forget_reason"] = row.forget_reason
        out["replaced_by_id"] = row.replaced_by_id
    _learning(row, out)
    return out


def explain_shape(
    e: Explanation,
    *,
    latest_first: bool = False,
    window: Window | None = None,
    rerank: tuple[float, int] | None = None,
    length: float | None = None,
) -> dict[str, Any]:
    """A recall match's ``explain``: the parts its place in the ranking came from.

    ``fused = cosine + w·lexical``; ``final = fused + salience + context`` is
    what matches are ordered by (ties: newest first). Ranks are 1-based among
    all candidates; ``lexical_rank`` is null for a match with no query word.
    ``latest_first`` is true for a match moved up ahead of the older matches
    it disagrees with (their ``older_than`` names it). ``time`` is what the
    question's time added (its ``window``, when it names one: ``[start, end)``,
    null for an open side). ``hop`` is what brought the match: ``search`` (the
    first ranking) here, ``session`` or ``graph`` in :func:`hop_explain_shape`. ``rerank``, when a
    reranker (RERANK_PROVIDER) read the match: its ``score`` and the match's
    ``first_rank``, its place before the reranker re-ordered the first ranking.
    ``lexical_length``, on a text longer than ``memory.rules.lexical_length.LENGTH_REFERENCE``:
    the part of its lexical share it kept (``lexical`` is already scaled by it).
    """
    out: dict[str, Any] = {
        "cosine": round(e.cosine, 6),
        "vector_rank": e.vector_rank,
        "lexical": round(e.lexical, 6),
        "lexical_rank": e.lexical_rank,
        "fused": round(e.fused, 6),
        "fused_rank": e.fused_rank,
        "salience": round(e.salience, 6),
        "context": round(e.context, 6),
        "time": round(e.time, 6),
        "final": round(e.final, 6),
        "latest_first": latest_first,
        "hop": "search",
    }
    if window is not None:
        out["window"] = [format_timestamp(window.start), format_timestamp(window.end)]
    if rerank is not None:
        out["rerank"] = {"score": round(rerank[0], 6), "first_rank": rerank[1]}
    if length is not None:
        out["lexical_length"] = round(length, 6)
    return out


def full_shape(row: MemoryRow) -> dict[str, Any]:
    """Every field of a row (get_memory, export_memories), in the order of ``shape_fields``."""
    out: dict[str, Any] = {}
    for name in shape_fields(type(row)):
        value = getattr(row, name)
        if isinstance(value, datetime):
            value = format_timestamp(value)
        elif isinstance(value, list):
            value = list(value)
        out[name] = value
    out["salience"] = round(row.salience, 6)  # as in every shape (_learning)
    return out


def hop_explain_shape(cosine: float, hop: str, hop_from: int) -> dict[str, Any]:
    """The ``explain`` of a match a hop brought (``memory.recall.hops``), placed after the
    first ranking's best: stored next to ``hop_from`` in its session (``session``), or
    naming a person or thing ``hop_from``'s relations name (``graph``)."""
    return {"cosine": round(cosine, 6), "hop": hop, "hop_from": hop_from}
