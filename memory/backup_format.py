"""The backup file format: JSON Lines, a header line then one memory per line.

Pure: standard library plus :mod:`memory.errors`, :mod:`memory.rules` and
the field list of :class:`storage.rows.MemoryRow` (a record's fields, their
order and how each is checked derive from it; the example below is that
order). Every value a record carries round-trips exactly:
timestamps are RFC 3339 UTC with microseconds, floats are JSON numbers
(Python's shortest repr gives back the same double; a float32 centroid
component is exactly representable as a double), texts are UTF-8.

Line 1, the header::

    {"format": "ownsona-export", "version": 2, "exported_at": "...Z",
     "scope": "all-users" | "user", "memories": N, "relations": R,
     "max_memory_id": I,
     "users": [{"username": "alice", "memories": n, "relations": r}, ...]}

Then one line per memory, by id::

    {"type": "memory", "user": "alice", "id": 17, "text": "...", "tags": [...],
     "importance": 0.5, "keep": false, "source_provider": null,
     "capture_mode": null, "session_id": null, "metadata": {},
     "created_at": "...", "updated_at": "...", "last_confirmed_at": null,
     "expires_at": null, "occurred_at": null, "valid_from": null,
     "valid_to": null, "occurred_at_parsed": false,
     "deleted_at": null, "forget_reason": null,
     "replaced_by_id": null, "salience": 0.0, "use_count": 0,
     "context_count": 0, "context_centroid": null,
     "embedding_provider": "local", "embedding_model": "...",
     "relations": [{"subject": ..., "predicate": ..., "object": ...,
                    "created_at": ...}]}

Version 2 added the event time (issue 17: ``occurred_at``, ``valid_from``,
``valid_to``, ``occurred_at_parsed``). A version 1 file is still read: its
records lack those fields (:data:`ADDED_IN`), and its memories restore with
no event time. A record of either version names exactly its version's fields.

No embedding vectors: an import embeds the texts again with its own model.
``context_centroid`` is the one vector kept: it is learned from feedback
(SUPPLEMENT §4) and cannot be recomputed, and it lives in the space of the
row's ``embedding_model``; an import keeps it only when it embeds with that
same model.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from memory.rules.text import reject_unstorable
from memory.rules.timestamps import format_timestamp, parse_timestamp
from storage.rows import MemoryRow, backup_fields

from .errors import MemoryServiceError, invalid

FORMAT = "ownsona-export"
#: The version written; every version from 1 up to it is read.
VERSION = 2
#: Fields a record has from a version on, with the value a record of an earlier version gets.
ADDED_IN: dict[str, tuple[int, Any]] = {
    "occurred_at": (2, None),
    "valid_from": (2, None),
    "valid_to": (2, None),
    "occurred_at_parsed": (2, False),
}

_HEADER_KEYS = frozenset(
    {"format", "version", "exported_at", "scope", "memories", "relations", "max_memory_id", "users"}
)
#: A record's fields: its account's name, the row's backed-up fields (in the
#: row's order, vectors included) and its relation edges.
_RECORD_KEYS = ("type", "user", *backup_fields(), "relations")
_RELATION_KEYS = frozenset({"subject", "predicate", "object", "created_at"})
#: The type of each field of the row (as written), which picks how it is checked.
_ROW_TYPES = {f.name: str(f.type) for f in fields(MemoryRow)}
#: The least value an integer field may hold where it is not 0.
_MINIMUM = {"id": 1, "replaced_by_id": 1}
#: The bounds of a float field that has them.
_BOUNDS = {"salience": (-1.0, 1.0)}
#: ``MemoryRecord.memory.user_id`` of a parsed record: a file names its account
#: (``user``); the store it goes into gives the id.
NO_USER_ID = 0


@dataclass(frozen=True)
class UserEntry:
    username: str
    memories: int
    relations: int


@dataclass(frozen=True)
class Header:
    exported_at: datetime
    scope: str
    memories: int
    relations: int
    max_memory_id: int
    users: tuple[UserEntry, ...]
    #: The file's format version (what its records hold, :data:`ADDED_IN`).
    version: int = VERSION


@dataclass(frozen=True)
class RelationRecord:
    subject: str
    predicate: str
    object: str
    created_at: datetime


@dataclass(frozen=True)
class MemoryRecord:
    """One memory of a backup, validated: its row, account, context vector and edges."""

    user: str
    #: Field meanings as in ``memories``; ``user_id`` is :data:`NO_USER_ID` when parsed.
    memory: MemoryRow
    context_centroid: list[float] | None
    relations: tuple[RelationRecord, ...]


# --- writing -----------------------------------------------------------------


def dump_line(value: dict[str, Any]) -> str:
    """One JSON Lines line (no trailing newline); non-ASCII text stays readable."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def header_line(header: Header) -> str:
    return dump_line(
        {
            "format": FORMAT,
            "version": VERSION,
            "exported_at": format_timestamp(header.exported_at),
            "scope": header.scope,
            "memories": header.memories,
            "relations": header.relations,
            "max_memory_id": header.max_memory_id,
            "users": [
                {"username": u.username, "memories": u.memories, "relations": u.relations}
                for u in header.users
            ],
        }
    )


def _record_layout(row_type: type[MemoryRow]) -> tuple[tuple[str, bool], ...]:
    """The backed-up fields of ``row_type``, each with whether the row holds it (or the record)."""
    row_fields = {f.name for f in fields(row_type)}
    return tuple((key, key in row_fields) for key in backup_fields(row_type))


_LAYOUT = _record_layout(MemoryRow)


def record_line(record: MemoryRecord) -> str:
    out: dict[str, Any] = {"type": "memory", "user": record.user}
    row_type = type(record.memory)
    layout = _LAYOUT if row_type is MemoryRow else _record_layout(row_type)
    for key, of_row in layout:
        value = getattr(record.memory if of_row else record, key)
        out[key] = format_timestamp(value) if isinstance(value, datetime) else value
    out["relations"] = [
        {
            "subject": r.subject,
            "predicate": r.predicate,
            "object": r.object,
            "created_at": format_timestamp(r.created_at),
        }
        for r in record.relations
    ]
    return dump_line(out)


# --- reading -----------------------------------------------------------------


def invalid_line(line_no: int, message: str) -> MemoryServiceError:
    """INVALID_INPUT naming the line (``detail.line``)."""
    # The message names the line and the field, never the line's content
    # (it may be memory text).
    return invalid(f"line {line_no}: {message}", line=line_no)


def _load(line_no: int, line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as ex:
        raise invalid_line(line_no, f"not valid JSON ({ex.msg} at column {ex.colno})") from None
    if not isinstance(value, dict):
        raise invalid_line(line_no, "not a JSON object")
    return value


def _int(line_no: int, value: Any, field: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise invalid_line(line_no, f"{field} must be an integer >= {minimum}")
    return value


def _number(line_no: int, value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise invalid_line(line_no, f"{field} must be a finite number")
    return float(value)


def _text(line_no: int, value: Any, field: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or (not optional and not value):
        raise invalid_line(
            line_no, f"{field} must be a {'string or null' if optional else 'non-empty string'}"
        )
    try:
        reject_unstorable(value, field=field)
    except MemoryServiceError as ex:
        raise invalid_line(line_no, ex.message) from None
    return value


def _time(line_no: int, value: Any, field: str, *, optional: bool = False) -> datetime | None:
    if value is None and optional:
        return None
    try:
        return parse_timestamp(value, field=field)
    except MemoryServiceError:
        raise invalid_line(
            line_no, f"{field} must be an RFC 3339 timestamp{' or null' if optional else ''}"
        ) from None


def _check_json_strings(line_no: int, value: Any, field: str) -> None:
    """jsonb refuses what ``text`` refuses (NUL, lone surrogates), keys included."""
    if isinstance(value, str):
        _text(line_no, value, field, optional=True)
    elif isinstance(value, dict):
        for key, item in value.items():
            _text(line_no, key, field, optional=True)
            _check_json_strings(line_no, item, field)
    elif isinstance(value, list):
        for item in value:
            _check_json_strings(line_no, item, field)


def _row_value(line_no: int, value: Any, field: str, kind: str) -> Any:
    """A field of the row, checked by its type in :class:`MemoryRow`."""
    if kind in ("int", "int | None"):
        if value is None and kind == "int | None":
            return None
        return _int(line_no, value, field, minimum=_MINIMUM.get(field, 0))
    if kind == "float":
        number = _number(line_no, value, field)
        low, high = _BOUNDS.get(field, (-math.inf, math.inf))
        if not low <= number <= high:
            raise invalid_line(line_no, f"{field} must be between {low:g} and {high:g}")
        return number
    if kind in ("str", "str | None"):
        return _text(line_no, value, field, optional=kind == "str | None")
    if kind in ("datetime", "datetime | None"):
        return _time(line_no, value, field, optional=kind == "datetime | None")
    if kind == "bool":
        if not isinstance(value, bool):
            raise invalid_line(line_no, f"{field} must be true or false")
        return value
    if kind == "list[str]":
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            raise invalid_line(line_no, f"{field} must be a list of strings")
        for item in value:
            _text(line_no, item, field)
        return list(value)
    if kind == "dict[str, Any]":
        if not isinstance(value, dict):
            raise invalid_line(line_no, f"{field} must be an object")
        _check_json_strings(line_no, value, field)
        return value
    raise TypeError(f"the backup format has no rule for {field} of type {kind}")


def _vector(line_no: int, value: Any, field: str) -> list[float] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise invalid_line(line_no, f"{field} must be a list of numbers or null")
    return [_number(line_no, x, field) for x in value]


def parse_header(line: str) -> Header:
    """The first line; INVALID_INPUT for anything but a header of this format and version."""
    value = _load(1, line)
    if value.get("format") != FORMAT:
        raise invalid_line(1, f"not an OwnSona export (the first line must be a {FORMAT!r} header)")
    version = value.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= VERSION:
        raise invalid_line(
            1,
            f"export format version {version!r} is not supported (this OwnSona reads 1 to "
            f"{VERSION})",
        )
    unknown = sorted(set(value) - _HEADER_KEYS)
    if unknown:
        raise invalid_line(1, f"unknown header fields {unknown}")
    users_raw = value.get("users")
    if not isinstance(users_raw, list):
        raise invalid_line(1, "users must be a list")
    users = []
    for entry in users_raw:
        if not isinstance(entry, dict) or set(entry) != {"username", "memories", "relations"}:
            raise invalid_line(1, "each users entry has exactly username, memories, relations")
        users.append(
            UserEntry(
                username=_text(1, entry["username"], "users.username") or "",
                memories=_int(1, entry["memories"], "users.memories"),
                relations=_int(1, entry["relations"], "users.relations"),
            )
        )
    if len({u.username for u in users}) != len(users):
        raise invalid_line(1, "users lists an account twice")
    header = Header(
        exported_at=_time(1, value.get("exported_at"), "exported_at"),  # type: ignore[arg-type]
        scope=_text(1, value.get("scope"), "scope") or "",
        memories=_int(1, value.get("memories"), "memories"),
        relations=_int(1, value.get("relations"), "relations"),
        max_memory_id=_int(1, value.get("max_memory_id"), "max_memory_id"),
        users=tuple(users),
        version=version,
    )
    if header.memories != sum(u.memories for u in users) or header.relations != sum(
        u.relations for u in users
    ):
        raise invalid_line(1, "the totals differ from the sum of the users' counts")
    return header


def _record_keys(version: int) -> tuple[str, ...]:
    """The fields a record of format ``version`` has."""
    return tuple(k for k in _RECORD_KEYS if ADDED_IN.get(k, (1, None))[0] <= version)


def parse_record(line_no: int, line: str, *, version: int = VERSION) -> MemoryRecord:
    """A memory line of a ``version`` file; INVALID_INPUT naming the line and the field
    when it is malformed. A field the version lacks gets its :data:`ADDED_IN` value."""
    value = _load(line_no, line)
    if value.get("type") != "memory":
        raise invalid_line(line_no, 'type must be "memory"')
    expected = _record_keys(version)
    keys = set(value)
    missing = [k for k in expected if k not in keys]
    if missing:
        raise invalid_line(line_no, f"missing fields {missing}")
    unknown = sorted(keys - set(expected))
    if unknown:
        raise invalid_line(line_no, f"unknown fields {unknown}")

    user = _text(line_no, value["user"], "user") or ""
    row: dict[str, Any] = {"user_id": NO_USER_ID}
    vectors: dict[str, list[float] | None] = {}
    for key in backup_fields():
        if key not in keys:
            row[key] = ADDED_IN[key][1]  # a field of a later version than the file's
            continue
        kind = _ROW_TYPES.get(key)
        if kind is None:
            vectors[key] = _vector(line_no, value[key], key)
        else:
            row[key] = _row_value(line_no, value[key], key, kind)
    # What the table's checks refuse, refused here with the line (migration 0017).
    start, end = row["valid_from"], row["valid_to"]
    if start is not None and end is not None and start > end:
        raise invalid_line(line_no, "valid_from is after valid_to")
    if row["occurred_at_parsed"] and row["occurred_at"] is None:
        raise invalid_line(line_no, "occurred_at_parsed is true but occurred_at is null")
    relations_raw = value["relations"]
    if not isinstance(relations_raw, list):
        raise invalid_line(line_no, "relations must be a list")
    relations = []
    for rel in relations_raw:
        if not isinstance(rel, dict) or set(rel) != _RELATION_KEYS:
            raise invalid_line(
                line_no, "each relation has exactly subject, predicate, object, created_at"
            )
        relations.append(
            RelationRecord(
                subject=_text(line_no, rel["subject"], "relations.subject") or "",
                predicate=_text(line_no, rel["predicate"], "relations.predicate") or "",
                object=_text(line_no, rel["object"], "relations.object") or "",
                created_at=_time(line_no, rel["created_at"], "relations.created_at"),  # type: ignore[arg-type]
            )
        )
    return MemoryRecord(user=user, memory=MemoryRow(**row), relations=tuple(relations), **vectors)
