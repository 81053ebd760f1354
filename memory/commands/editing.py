"""``update_memory(_batch)``, ``confirm``, ``forget(_batch)``: changes to stored rows, parsed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memory.errors import INVALID_INPUT, LIMIT_EXCEEDED, MemoryServiceError, invalid
from memory.rules.inputs import Args, batch_list, memory_id, parse_each, reject_unknown
from memory.rules.text import check_secret, clean_text, normalize_tags, normalize_text
from memory.rules.timestamps import parse_timestamp

from .codec import Command, command, part
from .event_time import EVENT_FIELDS, event_changes

if TYPE_CHECKING:
    from config.settings import Settings

#: The fields update_memory can change, in the order changed_fields lists them.
UPDATE_FIELDS = (
    "text",
    "tags",
    "importance",
    "expires_at",
    "last_confirmed_at",
    *EVENT_FIELDS,
    "keep",
)
#: Every field of an update_memory_batch item (the tool's item schema lists the same).
UPDATE_ITEM_FIELDS = frozenset({"id", *UPDATE_FIELDS})
#: Every argument of update_memory: an item plus dry_run.
UPDATE_MEMORY_FIELDS = UPDATE_ITEM_FIELDS | {"dry_run"}
_REASON_CHARS = 1000


# --- update ------------------------------------------------------------------


@part
@dataclass(frozen=True)
class UpdateRequest:
    id: int
    changes: dict[str, Any]  # field -> new value (text carries its normalized form separately)
    normalized_text: str | None


def parse_update(
    raw: object, *, max_chars: int, known: frozenset[str] = UPDATE_ITEM_FIELDS
) -> UpdateRequest:
    """Validate one update_memory call or update_memory_batch item (``known`` its fields)."""
    args = Args(raw)
    reject_unknown(raw, known)
    mid = memory_id(args)
    changes: dict[str, Any] = {}
    normalized = None
    if args.present("text"):
        text = clean_text(args.raw("text"), field="text", max_chars=max_chars)
        check_secret(text)
        changes["text"] = text
        normalized = normalize_text(text)
    if args.has("tags"):  # null means "leave unchanged"; [] clears the tags
        changes["tags"] = normalize_tags(args.raw("tags"), refuse_secrets=True)
    if args.present("importance"):
        if args.raw("importance") is None:
            raise invalid("importance must be a number between 0 and 1.", field="importance")
        changes["importance"] = args.number("importance", default=None, minimum=0.0, maximum=1.0)
    if args.present("expires_at"):
        # null clears the expiry; a past instant would hide the row: forget is for that.
        value = args.raw("expires_at")
        expires = None if value is None else parse_timestamp(value, field="expires_at")
        if expires is not None and expires <= datetime.now(UTC):
            raise invalid(
                "expires_at is in the past; use forget to retire a memory.", field="expires_at"
            )
        changes["expires_at"] = expires
    if args.present("last_confirmed_at"):
        value = args.raw("last_confirmed_at")
        if value is None:
            raise invalid(
                "last_confirmed_at must be a date-time; use confirm to refresh it.",
                field="last_confirmed_at",
            )
        changes["last_confirmed_at"] = parse_timestamp(value, field="last_confirmed_at")
    # null clears one; valid_from after valid_to is refused here, and against the row's
    # other end when only one is given (memory.editing).
    changes.update(event_changes(args))
    if args.has("keep"):  # null is "not given": only an explicit false unlocks
        changes["keep"] = args.boolean("keep")
    if not changes:
        raise invalid(
            "Nothing to update: supply at least one of text, tags, importance, expires_at, "
            "last_confirmed_at, occurred_at, valid_from, valid_to or keep.",
            id=mid,
        )
    return UpdateRequest(mid, changes, normalized)


@command
@dataclass(frozen=True)
class UpdateMemory(Command):
    request: UpdateRequest
    dry_run: bool

    @classmethod
    def parse(cls, raw: object, settings: Settings) -> UpdateMemory:
        request = parse_update(raw, max_chars=settings.max_text_chars, known=UPDATE_MEMORY_FIELDS)
        return cls(request, Args(raw).boolean("dry_run"))


@command
@dataclass(frozen=True)
class UpdateMemoryBatch(Command):
    #: In input order; an item that failed validation is its error, reported in its place.
    items: tuple[UpdateRequest | MemoryServiceError, ...]
    #: Each item's id as sent when it is an integer (echoed with the item's error), else None.
    item_ids: tuple[int | None, ...]
    dry_run: bool

    @classmethod
    def parse(cls, raw: object, settings: Settings) -> UpdateMemoryBatch:
        args = Args(raw)
        raw_items = batch_list(
            args,
            "items",
            settings.max_batch_size,
            over_code=INVALID_INPUT,
            required="The items field is required: an array.",
        )
        dry_run = args.boolean("dry_run")
        max_chars = settings.max_text_chars
        items = parse_each(raw_items, lambda item: parse_update(item, max_chars=max_chars))
        return cls(items, tuple(_item_id(item) for item in raw_items), dry_run)


def _item_id(item: object) -> int | None:
    if isinstance(item, dict):
        value = item.get("id")
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


# --- confirm -----------------------------------------------------------------


@command
@dataclass(frozen=True)
class Confirm(Command):
    id: int

    @classmethod
    def parse(cls, raw: object, settings: Settings) -> Confirm:
        return cls(memory_id(Args(raw)))


# --- forget ------------------------------------------------------------------


@command
@dataclass(frozen=True)
class Forget(Command):
    id: int
    hard_delete: bool
    reason: str | None
    replaced_by_id: int | None
    dry_run: bool

    @classmethod
    def parse(cls, raw: object, settings: Settings) -> Forget:
        args = Args(raw)
        mid = memory_id(args)
        hard = args.boolean("hard_delete")
        reason = args.string("reason", max_len=_REASON_CHARS)
        replaced_by = args.integer("replaced_by_id", minimum=1)
        dry_run = args.boolean("dry_run")
        if hard and (reason is not None or replaced_by is not None):
            raise invalid(
                "reason and replaced_by_id cannot be used with hard_delete: a hard delete "
                "leaves no row to record them on.",
                field="reason" if reason is not None else "replaced_by_id",
            )
        if replaced_by == mid:
            raise invalid("A memory cannot be replaced by itself.", field="replaced_by_id")
        return cls(mid, hard, reason, replaced_by, dry_run)


@command
@dataclass(frozen=True)
class ForgetBatch(Command):
    #: In input order; an entry that is not a memory id is its error, reported in its place.
    ids: tuple[int | MemoryServiceError, ...]
    #: The entries as sent, echoed as the ``id`` of an entry that failed validation.
    sent: tuple[Any, ...]
    reason: str | None
    dry_run: bool

    @classmethod
    def parse(cls, raw: object, settings: Settings) -> ForgetBatch:
        args = Args(raw)
        raw_ids = batch_list(
            args,
            "ids",
            settings.max_batch_size,
            over_code=LIMIT_EXCEEDED,
            required="The ids field is required: an array of memory ids.",
            kind="an array of integer ids",
        )
        reason = args.string("reason", max_len=_REASON_CHARS)
        dry_run = args.boolean("dry_run")
        return cls(parse_each(raw_ids, _batch_id), tuple(raw_ids), reason, dry_run)


def _batch_id(value: object) -> int:
    """One entry of forget_batch's ids: a memory id, refused as an item of ``ids``."""
    try:
        return memory_id(Args({"id": value}))
    except MemoryServiceError as ex:
        raise invalid(f"Item is not a valid memory id: {ex.message}", field="ids") from None
