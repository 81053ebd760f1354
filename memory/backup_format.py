"""The backup file format: JSON Lines, a header line then one memory per line.

Pure: standard library plus :mod:`memory.errors`, :mod:`memory.text` and
:mod:`memory.timestamps`. Every value a record carries round-trips exactly:
timestamps are RFC 3339 UTC with microseconds, floats are JSON numbers
(Python's shortest repr gives back the same double; a float32 centroid
component is exactly representable as a double), texts are UTF-8.

Line 1, the header::

    {"format": "ownsona-export", "version": 1, "exported_at": "...Z",
     "scope": "all-users" | "user", "memories": N, "relations": R,
     "max_memory_id": I,
     "users": [{"username": "alice", "memories": n, "relations": r}, ...]}

Then one line per memory, by id::

    {"type": "memory", "user": "alice", "id": 17, "text": "...", "tags": [...],
     "importance": 0.5, "keep": false, "source_provider": null,
     "capture_mode": null, "session_id": null, "metadata": {},
     "created_at": "...", "updated_at": "...", "last_confirmed_at": null,
     "expires_at": null, "deleted_at": null, "forget_reason": null,
     "replaced_by_id": null, "salience": 0.0, "use_count": 0,
     "context_count": 0, "context_centroid": null,
     "embedding_provider": "local", "embedding_model": "...",
     "relations": [{"subject": ..., "predicate": ..., "object": ...,
                    "created_at": ...}]}

No embedding vectors: an import embeds the texts again with its own model.
``context_centroid`` is the one vector kept: it is learned from feedback
(SUPPLEMENT §4) and cannot be recomputed, and it lives in the space of the
row's ``embedding_model``; an import keeps it only when it embeds with that
same model.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memory.rules.text import reject_unstorable
from memory.rules.timestamps import format_timestamp, parse_timestamp

from .errors import MemoryServiceError, invalid

FORMAT = "ownsona-export"
VERSION = 1

_HEADER_KEYS = frozenset(
    {"format", "version", "exported_at", "scope", "memories", "relations", "max_memory_id", "users"}
)
_RECORD_KEYS = (
    "type",
    "user",
    "id",
    "text",
    "tags",
    "importance",
    "keep",
    "source_provider",
    "capture_mode",
    "session_id",
    "metadata",
    "created_at",
    "updated_at",
    "last_confirmed_at",
    "expires_at",
    "deleted_at",
    "forget_reason",
    "replaced_by_id",
    "salience",
    "use_count",
    "context_count",
    "context_centroid",
    "embedding_provider",
    "embedding_model",
    "relations",
)
_RELATION_KEYS = frozenset({"subject", "predicate", "object", "created_at"})
_OPTIONAL_TEXT = ("source_provider", "capture_mode", "session_id", "forget_reason")


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


@dataclass(frozen=True)
class RelationRecord:
    subject: str
    predicate: str
    object: str
    created_at: datetime


@dataclass(frozen=True)
class MemoryRecord:
    """One memory of a backup, validated; field meanings as in ``memories``."""

    user: str
    id: int
    text: str
    tags: list[str]
    importance: float
    keep: bool
    source_provider: str | None
    capture_mode: str | None
    session_id: str | None
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    last_confirmed_at: datetime | None
    expires_at: datetime | None
    deleted_at: datetime | None
    forget_reason: str | None
    replaced_by_id: int | None
    salience: float
    use_count: int
    context_count: int
    context_centroid: list[float] | None
    embedding_provider: str
    embedding_model: str
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


def record_line(record: MemoryRecord) -> str:
    out: dict[str, Any] = {"type": "memory"}
    for key in _RECORD_KEYS[1:]:
        value = getattr(record, key)
        if isinstance(value, datetime):
            value = format_timestamp(value)
        elif key == "relations":
            value = [
                {
                    "subject": r.subject,
                    "predicate": r.predicate,
                    "object": r.object,
                    "created_at": format_timestamp(r.created_at),
                }
                for r in value
            ]
        out[key] = value
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


def _check_json_strings(line_no: int, value: Any) -> None:
    """jsonb refuses what ``text`` refuses (NUL, lone surrogates), keys included."""
    if isinstance(value, str):
        _text(line_no, value, "metadata", optional=True)
    elif isinstance(value, dict):
        for key, item in value.items():
            _text(line_no, key, "metadata", optional=True)
            _check_json_strings(line_no, item)
    elif isinstance(value, list):
        for item in value:
            _check_json_strings(line_no, item)


def parse_header(line: str) -> Header:
    """The first line; INVALID_INPUT for anything but a header of this format and version."""
    value = _load(1, line)
    if value.get("format") != FORMAT:
        raise invalid_line(1, f"not an OwnSona export (the first line must be a {FORMAT!r} header)")
    if value.get("version") != VERSION:
        raise invalid_line(
            1,
            f"export format version {value.get('version')!r} is not supported (this OwnSona reads {VERSION})",
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
    )
    if header.memories != sum(u.memories for u in users) or header.relations != sum(
        u.relations for u in users
    ):
        raise invalid_line(1, "the totals differ from the sum of the users' counts")
    return header


def parse_record(line_no: int, line: str) -> MemoryRecord:
    """A memory line; INVALID_INPUT naming the line and the field when it is malformed."""
    value = _load(line_no, line)
    if value.get("type") != "memory":
        raise invalid_line(line_no, 'type must be "memory"')
    keys = set(value)
    missing = [k for k in _RECORD_KEYS if k not in keys]
    if missing:
        raise invalid_line(line_no, f"missing fields {missing}")
    unknown = sorted(keys - set(_RECORD_KEYS))
    if unknown:
        raise invalid_line(line_no, f"unknown fields {unknown}")

    tags = value["tags"]
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise invalid_line(line_no, "tags must be a list of strings")
    for tag in tags:
        _text(line_no, tag, "tags")
    if not isinstance(value["keep"], bool):
        raise invalid_line(line_no, "keep must be true or false")
    if not isinstance(value["metadata"], dict):
        raise invalid_line(line_no, "metadata must be an object")
    _check_json_strings(line_no, value["metadata"])
    salience = _number(line_no, value["salience"], "salience")
    if not -1.0 <= salience <= 1.0:
        raise invalid_line(line_no, "salience must be between -1 and 1")
    replaced_by = value["replaced_by_id"]
    if replaced_by is not None:
        replaced_by = _int(line_no, replaced_by, "replaced_by_id", minimum=1)
    centroid = value["context_centroid"]
    if centroid is not None:
        if not isinstance(centroid, list) or not centroid:
            raise invalid_line(line_no, "context_centroid must be a list of numbers or null")
        centroid = [_number(line_no, x, "context_centroid") for x in centroid]
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
    optional = {k: _text(line_no, value[k], k, optional=True) for k in _OPTIONAL_TEXT}
    return MemoryRecord(
        user=_text(line_no, value["user"], "user") or "",
        id=_int(line_no, value["id"], "id", minimum=1),
        text=_text(line_no, value["text"], "text") or "",
        tags=list(tags),
        importance=_number(line_no, value["importance"], "importance"),
        keep=value["keep"],
        metadata=value["metadata"],
        created_at=_time(line_no, value["created_at"], "created_at"),  # type: ignore[arg-type]
        updated_at=_time(line_no, value["updated_at"], "updated_at"),  # type: ignore[arg-type]
        last_confirmed_at=_time(
            line_no, value["last_confirmed_at"], "last_confirmed_at", optional=True
        ),
        expires_at=_time(line_no, value["expires_at"], "expires_at", optional=True),
        deleted_at=_time(line_no, value["deleted_at"], "deleted_at", optional=True),
        replaced_by_id=replaced_by,
        salience=salience,
        use_count=_int(line_no, value["use_count"], "use_count"),
        context_count=_int(line_no, value["context_count"], "context_count"),
        context_centroid=centroid,
        embedding_provider=_text(line_no, value["embedding_provider"], "embedding_provider") or "",
        embedding_model=_text(line_no, value["embedding_model"], "embedding_model") or "",
        relations=tuple(relations),
        **optional,  # type: ignore[arg-type]
    )
