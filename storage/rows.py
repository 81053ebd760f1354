"""Frozen row dataclasses built by ``psycopg.rows.class_row``; no vectors cross this line."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class MemoryRow:
    id: int
    user_id: int
    text: str
    tags: list[str]
    importance: float
    keep: bool
    source_provider: str | None
    capture_mode: str | None
    session_id: str | None
    metadata: dict[str, Any]
    embedding_provider: str
    embedding_model: str
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


@dataclass(frozen=True)
class ScoredMemoryRow:
    """A memory with its raw cosine to a query and its learned-context match."""

    row: MemoryRow
    cosine: float
    context_match: float


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
class NewMemory:
    text: str
    normalized_text: str
    embedding: Any  # numpy float32 vector
    embedding_provider: str
    embedding_model: str
    tags: list[str]
    importance: float
    keep: bool
    source_provider: str | None
    capture_mode: str | None
    session_id: str | None
    last_confirmed_at: datetime | None
    expires_at: datetime | None


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
