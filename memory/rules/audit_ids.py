"""Which memories a tool call read or changed, from its arguments and its payload.

Pure: the audit log (``memory.audit``) records ids only, never text. A
memory id is an integer under one of :data:`ID_KEYS`, anywhere in the
arguments or the payload (a match, a listing's item, a batch's result, a
group of a scan). What a write's arguments name it changed; what its
payload names it stored or changed, except what it only looked at (near
duplicates, earlier corrections) or skipped; a dry run changed nothing; what
a read's payload names it read.
Lists are capped at :data:`MAX_IDS` per record.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

#: Keys whose integer values (or lists of integers) are memory ids.
ID_KEYS = frozenset(
    {"id", "ids", "memory_id", "memory_ids", "supersedes", "replaced_by_id", "source_memory_id"}
)
MAX_IDS = 1000
#: Payload keys that name memories a write looked at but did not change: a remember's
#: near-duplicates and earlier corrections, and what a call skipped.
NOT_CHANGED_KEYS = frozenset({"near_duplicates", "previously_corrected", "skipped"})
_MAX_DEPTH = 8


def memory_ids(value: Any) -> list[int]:
    """The distinct memory ids in ``value``, in the order first seen, at most :data:`MAX_IDS`."""
    seen: dict[int, None] = {}
    for found in _walk(value, 0):
        seen.setdefault(found, None)
        if len(seen) >= MAX_IDS:
            break
    return list(seen)


def _walk(value: Any, depth: int) -> Iterator[int]:
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ID_KEYS:
                yield from _ints(item)
            elif key in NOT_CHANGED_KEYS:
                continue
            elif isinstance(item, dict | list):
                yield from _walk(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item, depth + 1)


def _ints(value: Any) -> Iterator[int]:
    if isinstance(value, bool):
        return
    if isinstance(value, int) and value > 0:
        yield value
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, int) and not isinstance(item, bool) and item > 0:
                yield item


def touched(
    arguments: dict[str, Any], payload: dict[str, Any], *, read_only: bool
) -> tuple[list[int], list[int]]:
    """``(read ids, changed ids)`` of one call."""
    if read_only:
        return memory_ids(payload), []
    if payload.get("ok") is not True or arguments.get("dry_run") is True:
        return [], []  # a refused call or a dry run changed nothing
    return [], memory_ids([arguments, payload])
