"""Frozen row dataclasses built by ``psycopg.rows.class_row``; no vectors cross this line.

:class:`MemoryRow` is the one list of a memory's fields. What else names
them is derived from it: the SELECT lists (:func:`select_list`), the backup's
dump, restore and file records (:func:`backup_fields`, :func:`copy_columns`)
and the full tool shape (:func:`shape_fields`). A field added to
``MemoryRow`` (with its :func:`column`) is read, backed up, restored and shown;
a backed-up one changes the backup file's records (the format's version).
A write starts from :class:`MemoryContent` (what ``remember`` is told; its
command item extends it), which :class:`NewMemory` extends with the vector.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, overload

from storage.sealing.user_keys import UserKeys

from .sealed_rows import keys_of, open_field, opened, sealed_values

#: Place in the full tool shape of a field that names none: after the ranked ones.
SHAPE_END = 1000


@dataclass(frozen=True)
class Column:
    """What the code derived from :class:`MemoryRow` needs to know of one of its fields."""

    #: PostgreSQL type of the column (the binary COPY of a restore names it).
    sql_type: str
    #: Place in the full tool shape (get_memory, export_memories); None: not shown.
    shape: int | None = SHAPE_END
    #: Written to backup records (``user_id`` is not: a record names its account).
    backed_up: bool = True
    #: A vector column only backups carry (reads never do), written right after this field.
    backup_vector: str | None = None


def column(
    sql_type: str,
    *,
    shape: int | None = SHAPE_END,
    backed_up: bool = True,
    backup_vector: str | None = None,
) -> dict[str, Column]:
    """The ``metadata`` of a :class:`MemoryRow` field."""
    return {"column": Column(sql_type, shape, backed_up, backup_vector)}


@dataclass(frozen=True)
class MemoryRow:
    """A memory as reads return it. Field order is the order of a backup record."""

    id: int = field(metadata=column("int8", shape=1))
    user_id: int = field(metadata=column("int8", shape=None, backed_up=False))
    text: str = field(metadata=column("text", shape=2))
    tags: list[str] = field(metadata=column("text[]", shape=3))
    importance: float = field(metadata=column("float8", shape=4))
    keep: bool = field(metadata=column("bool", shape=5))
    source_provider: str | None = field(metadata=column("text", shape=13))
    capture_mode: str | None = field(metadata=column("text", shape=14))
    session_id: str | None = field(metadata=column("text", shape=15))
    metadata: dict[str, Any] = field(metadata=column("jsonb", shape=None))
    created_at: datetime = field(metadata=column("timestamptz", shape=6))
    updated_at: datetime = field(metadata=column("timestamptz", shape=7))
    last_confirmed_at: datetime | None = field(metadata=column("timestamptz", shape=11))
    expires_at: datetime | None = field(metadata=column("timestamptz", shape=12))
    # Event time (issue 17): when the fact happened or holds, not when it was stored.
    occurred_at: datetime | None = field(metadata=column("timestamptz", shape=12))
    valid_from: datetime | None = field(metadata=column("timestamptz", shape=12))
    valid_to: datetime | None = field(metadata=column("timestamptz", shape=12))
    #: occurred_at was read from the text, so a new text is read again (memory.rules.event_dates).
    occurred_at_parsed: bool = field(metadata=column("bool", shape=12))
    deleted_at: datetime | None = field(metadata=column("timestamptz", shape=8))
    forget_reason: str | None = field(metadata=column("text", shape=9))
    replaced_by_id: int | None = field(metadata=column("int8", shape=10))
    salience: float = field(metadata=column("float8", shape=18))
    use_count: int = field(metadata=column("int4", shape=19))
    # The learned context centroid (SUPPLEMENT §4) is a vector: never read
    # into a row, but a backup keeps it (it cannot be recomputed).
    context_count: int = field(metadata=column("int4", shape=20, backup_vector="context_centroid"))
    embedding_provider: str = field(metadata=column("text", shape=16))
    embedding_model: str = field(metadata=column("text", shape=17))

    @property
    def chars(self) -> int:
        """The text's length in characters (a sealed row's without opening it)."""
        return len(self.text)


#: The columns of each row type read so far: recall builds some 50 rows a call, and
#: reading a type's fields each time cost about as much as building the row.
_COLUMNS_OF: dict[type[MemoryRow], tuple[tuple[str, Column], ...]] = {}


def _columns(row_type: type[MemoryRow]) -> tuple[tuple[str, Column], ...]:
    found = _COLUMNS_OF.get(row_type)
    if found is None:
        found = _COLUMNS_OF[row_type] = tuple(
            (f.name, f.metadata["column"]) for f in fields(row_type)
        )
    return found


def select_list(row_type: type[Any] = MemoryRow, *, prefix: str = "") -> str:
    """The columns of a row dataclass for a SELECT (``prefix``: a table alias and dot)."""
    return ", ".join(prefix + f.name for f in fields(row_type))


def memory_row(values: Mapping[str, Any], row_type: type[MemoryRow] = MemoryRow) -> MemoryRow:
    """The row among ``values`` (a ``dict_row`` that may hold more columns), opened if sealed."""
    values = opened(values)
    return row_type(**{name: values[name] for name, _ in _columns(row_type)})


class _Opened:
    """A sealed field of a :class:`_DeferredRow`: opened on its first read, then kept on
    the row (the instance's own value hides this descriptor from then on)."""

    name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, row: None, owner: type) -> _Opened: ...
    @overload
    def __get__(self, row: _DeferredRow, owner: type) -> Any: ...
    def __get__(self, row: _DeferredRow | None, owner: type) -> Any:
        if row is None:
            return self
        value = open_field(row._keys, row.id, self.name, row._sealed[self.name])
        row.__dict__[self.name] = value
        return value


class _DeferredRow(MemoryRow):
    """A sealed row whose sealed fields open when first read (:func:`deferred_row`).

    Built by :func:`deferred_row` only (never by ``__init__``, which would set every field).
    """

    text = _Opened()
    tags = _Opened()
    metadata = _Opened()
    forget_reason = _Opened()
    #: The keys in scope when the row was read, its sealed values by field, its length.
    _keys: UserKeys
    _sealed: dict[str, bytes]
    _chars: int | None

    @property
    def chars(self) -> int:
        if self._chars is None or "text" in self.__dict__:
            return len(self.text)
        return self._chars


def deferred_row(values: Mapping[str, Any]) -> MemoryRow:
    """:func:`memory_row` for a row that is ranked before it is shown, if it ever is.

    Recall reads some 50 candidates to return 10 (BENCHMARKS.md, issue 34): a sealed
    candidate's text, tags, metadata and forget reason are opened when first read (the
    page's, the few a ranking step compares), not when read from the database. Its user's
    keys are taken from the scope now, and refused now as :func:`memory_row` refuses them;
    a value that does not open fails on its first read.
    """
    sealed = sealed_values(values)
    if not sealed:  # a plain row, built as memory_row would, without looking again
        return MemoryRow(**{name: values[name] for name, _ in _columns(MemoryRow)})
    row = object.__new__(_DeferredRow)
    own = row.__dict__
    for name, _ in _columns(MemoryRow):
        if name not in sealed:
            own[name] = values[name]
    own["_keys"], own["_sealed"] = keys_of(int(values["user_id"])), sealed
    own["_chars"] = values.get("text_chars")
    return row


def memory_rows(cursor: Any) -> Any:
    """A psycopg row factory of :class:`MemoryRow` (opened if sealed), for a SELECT of
    ``memory_sql.COLUMNS``."""
    names = [c.name for c in cursor.description or ()]

    def make(values: Sequence[Any]) -> MemoryRow:
        return memory_row(dict(zip(names, values, strict=True)))

    return make


def scored_row(values: Mapping[str, Any]) -> ScoredMemoryRow:
    """A searched row: its columns, ``cosine``, ``context_match`` and, when read,
    ``matched`` among ``values``; opened as it is read (:func:`deferred_row`)."""
    return ScoredMemoryRow(
        deferred_row(values),
        float(values["cosine"]),
        float(values["context_match"]),
        float(values.get("matched", 0.0)),
    )


def backup_fields(row_type: type[MemoryRow] = MemoryRow) -> tuple[str, ...]:
    """The fields of a backup record, in the file's order, vectors included."""
    out: list[str] = []
    for name, col in _columns(row_type):
        if col.backed_up:
            out.append(name)
        if col.backup_vector is not None:
            out.append(col.backup_vector)
    return tuple(out)


def copy_columns(row_type: type[MemoryRow] = MemoryRow) -> tuple[tuple[str, str], ...]:
    """``(name, PostgreSQL type)`` of the row's columns and of its backed-up vectors."""
    out: list[tuple[str, str]] = []
    for name, col in _columns(row_type):
        out.append((name, col.sql_type))
        if col.backup_vector is not None:
            out.append((col.backup_vector, "vector"))
    return tuple(out)


def shape_fields(row_type: type[MemoryRow] = MemoryRow) -> tuple[str, ...]:
    """The fields of the full tool shape, in its order (ties: the row's order)."""
    shown = [(col.shape, name) for name, col in _columns(row_type) if col.shape is not None]
    return tuple(name for _, name in sorted(shown, key=lambda s: s[0]))


@dataclass(frozen=True)
class ScoredMemoryRow:
    """A memory with its raw cosine to a query and its learned-context match."""

    row: MemoryRow
    cosine: float
    context_match: float
    #: Sum of the weights of the query's terms the row contains (0 when none, or not asked).
    matched: float = 0.0


@dataclass(frozen=True)
class Neighbour:
    """A near match found while writing (near duplicate or tombstone)."""

    probe: int  # index of the probing item in the write batch
    id: int
    text: str
    tags: list[str]
    score: float
    forget_reason: str | None
    replaced_by_id: int | None
    deleted_at: datetime | None


@dataclass(frozen=True)
class MemoryContent:
    """What a writer says of a new memory: a ``remember`` item holds these, a
    :class:`NewMemory` adds the embedding."""

    text: str
    normalized_text: str
    tags: list[str]
    importance: float
    keep: bool
    source_provider: str | None
    capture_mode: str | None
    session_id: str | None
    last_confirmed_at: datetime | None
    expires_at: datetime | None
    # Event time (issue 17). Defaults, so that a queued write sent before these fields
    # existed still decodes (memory.commands.codec); keyword-only, so subclasses may add
    # fields without defaults.
    occurred_at: datetime | None = field(default=None, kw_only=True)
    valid_from: datetime | None = field(default=None, kw_only=True)
    valid_to: datetime | None = field(default=None, kw_only=True)
    occurred_at_parsed: bool = field(default=False, kw_only=True)


@dataclass(frozen=True)
class NewMemory(MemoryContent):
    """A row to insert: its content and the embedding of its text."""

    embedding: Any  # numpy float32 vector
    embedding_provider: str
    embedding_model: str

    @classmethod
    def embedded(
        cls, content: MemoryContent, embedding: Any, *, provider: str, model: str
    ) -> NewMemory:
        """``content`` (any :class:`MemoryContent`, its other fields ignored) with its vector."""
        values = {f.name: getattr(content, f.name) for f in fields(MemoryContent)}
        return cls(
            **values, embedding=embedding, embedding_provider=provider, embedding_model=model
        )


@dataclass(frozen=True)
class MemoryFilter:
    """Filters shared by listing and counting (the chapter's cleanup filters)."""

    include_deleted: bool = False
    untagged_only: bool = False
    min_chars: int | None = None
    max_chars: int | None = None
    not_confirmed_since: datetime | None = None
    tags: tuple[str, ...] = ()
    source_provider: str | None = None


@dataclass(frozen=True)
class TagCount:
    tag: str
    count: int


@dataclass(frozen=True)
class ProviderCount:
    provider: str
    count: int


@dataclass(frozen=True)
class StoreStats:
    total: int
    active: int
    soft_deleted: int
    expired: int
    avg_importance: float | None
    oldest_created_at: datetime | None
    newest_created_at: datetime | None
    #: The most used tags of active rows, most used first (ties by tag).
    top_tags: list[TagCount]
    #: Every row's source provider ("(none)" for none), most rows first (ties by name).
    by_provider: list[ProviderCount]
