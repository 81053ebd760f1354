"""The read tools' arguments, parsed: recall and its relatives, listings, counts, export.

``recall`` and ``search_memory`` are one tool under two names (tools chapter,
search_memory): both parse into :class:`Recall`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from memory.errors import invalid
from memory.rules.inputs import Args, memory_id
from memory.rules.text import clean_text, normalize_tags
from memory.rules.timestamps import parse_timestamp
from storage.rows import MemoryFilter

from .codec import Command, command, part

if TYPE_CHECKING:
    from config.settings import Settings

#: Most tags list_tags returns in one call.
MAX_TAG_LIST = 1000
_SHORT_FIELD = 200


def _tag_filter(args: Args) -> tuple[str, ...]:
    """Normalized filter tags; tags that all normalize away would silently mean "any"."""
    tags = normalize_tags(args.raw("tags"))
    if not tags and args.raw("tags"):
        raise invalid("None of the given tags is a valid tag after normalisation.", field="tags")
    return tuple(tags)


@dataclass(frozen=True)
class _Search:
    """What recall and build_context_prompt share: the question and its bounds."""

    limit: int
    min_score: float | None
    tags: tuple[str, ...]
    #: At the caller's offset: "yesterday" and "last week" are the caller's.
    as_of: datetime | None


def _search(args: Args, settings: Settings, query_field: str) -> tuple[str, _Search]:
    query = clean_text(args.raw(query_field), field=query_field, max_chars=settings.max_text_chars)
    limit = args.integer(
        "limit", default=settings.default_recall_limit, minimum=1, cap=settings.max_recall_limit
    )
    min_score = args.number("min_score", default=None, minimum=0.0, maximum=1.0)
    tags = _tag_filter(args)
    as_of = (
        parse_timestamp(args.raw("as_of"), field="as_of", keep_offset=True)
        if args.has("as_of")
        else None
    )
    assert limit is not None
    return query, _Search(limit, min_score, tags, as_of)


@command
@dataclass(frozen=True)
class Recall(Command):
    """``recall`` and ``search_memory``."""

    query: str
    limit: int
    min_score: float | None
    tags: tuple[str, ...]
    as_of: datetime | None
    explain: bool

    @classmethod
    def parse(cls, raw: object, settings: Settings) -> Recall:
        args = Args(raw)
        query, s = _search(args, settings, "query")
        return cls(query, s.limit, s.min_score, s.tags, s.as_of, args.boolean("explain"))


@command
@dataclass(frozen=True)
class BuildContextPrompt(Command):
    user_prompt: str
    limit: int
    min_score: float | None
    tags: tuple[str, ...]
    as_of: datetime | None
    max_chars: int | None

    @classmethod
    def parse(cls, raw: object, settings: Settings) -> BuildContextPrompt:
        args = Args(raw)
        prompt, s = _search(args, settings, "user_prompt")
        max_chars = args.integer("max_chars", minimum=1)
        return cls(prompt, s.limit, s.min_score, s.tags, s.as_of, max_chars)


@part
@dataclass(frozen=True)
class Filters:
    """The filters of the listing and of the count (combined with AND)."""

    include_deleted: bool
    untagged_only: bool
    min_chars: int | None
    max_chars: int | None
    not_confirmed_since: datetime | None
    tags: tuple[str, ...]
    source_provider: str | None

    def memory_filter(self) -> MemoryFilter:
        return MemoryFilter(
            include_deleted=self.include_deleted,
            untagged_only=self.untagged_only,
            min_chars=self.min_chars,
            max_chars=self.max_chars,
            not_confirmed_since=self.not_confirmed_since,
            tags=self.tags,
            source_provider=self.source_provider,
        )


def _filters(args: Args) -> Filters:
    min_chars = args.integer("min_chars")
    max_chars = args.integer("max_chars")
    if min_chars is not None and min_chars < 0:
        raise invalid("min_chars must not be negative.", field="min_chars")
    if max_chars is not None and max_chars < 0:
        raise invalid("max_chars must not be negative.", field="max_chars")
    if min_chars is not None and max_chars is not None and min_chars > max_chars:
        raise invalid("min_chars must not be greater than max_chars.", field="min_chars")
    since = None
    if args.has("not_confirmed_since"):
        since = parse_timestamp(args.raw("not_confirmed_since"), field="not_confirmed_since")
        if since > datetime.now(UTC):
            raise invalid(
                "not_confirmed_since must not be in the future.", field="not_confirmed_since"
            )
    return Filters(
        include_deleted=args.boolean("include_deleted"),
        untagged_only=args.boolean("untagged_only"),
        min_chars=min_chars,
        max_chars=max_chars,
        not_confirmed_since=since,
        tags=_tag_filter(args),
        source_provider=args.string("source_provider", max_len=_SHORT_FIELD),
    )


@command
@dataclass(frozen=True)
class ListMemories(Command):
    limit: int
    offset: int
    filters: Filters

    @classmethod
    def parse(cls, raw: object, settings: Settings) -> ListMemories:
        args = Args(raw)
        limit = args.integer("limit", default=20, minimum=1, cap=settings.max_recall_limit)
        offset = args.integer("offset", default=0, minimum=0)
        return cls(limit or 20, offset or 0, _filters(args))


@command
@dataclass(frozen=True)
class CountMemories(Command):
    filters: Filters

    @classmethod
    def parse(cls, raw: object, settings: Settings) -> CountMemories:
        return cls(_filters(Args(raw)))


@command
@dataclass(frozen=True)
class TextSearch(Command):
    text: str
    limit: int

    @classmethod
    def parse(cls, raw: object, settings: Settings) -> TextSearch:
        args = Args(raw)
        fragment = clean_text(args.raw("text"), field="text", max_chars=settings.max_text_chars)
        limit = args.integer("limit", default=20, minimum=1, cap=settings.max_recall_limit)
        return cls(fragment, limit or 20)


@command
@dataclass(frozen=True)
class GetMemory(Command):
    id: int

    @classmethod
    def parse(cls, raw: object, settings: Settings) -> GetMemory:
        return cls(memory_id(Args(raw)))


@command
@dataclass(frozen=True)
class MemoryStats(Command):
    @classmethod
    def parse(cls, raw: object, settings: Settings) -> MemoryStats:
        Args(raw)
        return cls()


@command
@dataclass(frozen=True)
class ListTags(Command):
    include_deleted: bool
    limit: int

    @classmethod
    def parse(cls, raw: object, settings: Settings) -> ListTags:
        args = Args(raw)
        include_deleted = args.boolean("include_deleted")
        limit = args.integer("limit", default=MAX_TAG_LIST, minimum=1, cap=MAX_TAG_LIST)
        return cls(include_deleted, limit or MAX_TAG_LIST)


@command
@dataclass(frozen=True)
class ExportMemories(Command):
    include_deleted: bool

    @classmethod
    def parse(cls, raw: object, settings: Settings) -> ExportMemories:
        return cls(Args(raw).boolean("include_deleted", default=True))
