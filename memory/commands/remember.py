"""``remember`` and ``remember_batch``: one fact, or many, validated and normalised."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from memory.errors import INVALID_INPUT, MemoryServiceError, invalid
from memory.rules.inputs import Args, batch_list, parse_each, reject_unknown
from memory.rules.text import check_secret, clean_text, normalize_tags, normalize_text
from memory.rules.timestamps import parse_timestamp
from storage.rows import MemoryContent

from .codec import Command, command, part
from .event_time import new_event_time

if TYPE_CHECKING:
    from config.settings import Settings

DEDUP_POLICIES = ("insert", "skip_if_near", "ask")
CAPTURE_MODES = ("explicit", "inferred")
#: A client clock this far ahead of ours is still "now".
_CLOCK_SKEW = timedelta(minutes=5)
_SHORT_FIELD = 200
#: Every field of a remember call or remember_batch item (the tools' item schema lists the same).
ITEM_FIELDS = frozenset(
    {
        "text",
        "tags",
        "importance",
        "source_provider",
        "capture_mode",
        "session_id",
        "dedup_policy",
        "expires_at",
        "last_confirmed_at",
        "occurred_at",
        "valid_from",
        "valid_to",
        "reference_time",
        "supersedes",
        "downweights",
        "keep",
    }
)


@part
@dataclass(frozen=True)
class RememberItem(MemoryContent):
    """One memory to remember: its content (the fields a stored row takes from
    it) and how to write it."""

    dedup_policy: str
    supersedes: tuple[int, ...]
    downweights: tuple[int, ...]


def parse_item(
    raw: object,
    *,
    max_chars: int,
    max_ids: int,
    default_source: str | None = None,
    default_policy: str = "ask",
    now: datetime | None = None,
) -> RememberItem:
    """Validate one ``remember`` argument object (or one batch item).

    An unknown field fails the item before anything else is looked at, so in
    a batch it fails that item alone.
    """
    now = now or datetime.now(UTC)
    args = Args(raw)
    reject_unknown(raw, ITEM_FIELDS)
    text = clean_text(args.raw("text"), field="text", max_chars=max_chars)
    check_secret(text)
    expires_at = (
        parse_timestamp(args.raw("expires_at"), field="expires_at")
        if args.has("expires_at")
        else None
    )
    if expires_at is not None and expires_at <= now:
        raise invalid(
            "expires_at is in the past; a memory must expire in the future.", field="expires_at"
        )
    confirmed = (
        parse_timestamp(args.raw("last_confirmed_at"), field="last_confirmed_at")
        if args.has("last_confirmed_at")
        else None
    )
    if confirmed is not None and confirmed > now + _CLOCK_SKEW:
        raise invalid("last_confirmed_at must not be in the future.", field="last_confirmed_at")
    event = new_event_time(args, text, now=now)
    source = args.string("source_provider", max_len=_SHORT_FIELD)
    return RememberItem(
        text=text,
        normalized_text=normalize_text(text),
        tags=normalize_tags(args.raw("tags"), refuse_secrets=True),
        importance=args.number("importance", default=0.5, minimum=0.0, maximum=1.0) or 0.0,
        keep=args.boolean("keep"),
        source_provider=source if source is not None else default_source,
        capture_mode=args.choice("capture_mode", CAPTURE_MODES, None),
        session_id=args.string("session_id", max_len=_SHORT_FIELD),
        dedup_policy=args.choice("dedup_policy", DEDUP_POLICIES, default_policy) or default_policy,
        expires_at=expires_at,
        last_confirmed_at=confirmed,
        occurred_at=event.occurred_at,
        valid_from=event.valid_from,
        valid_to=event.valid_to,
        occurred_at_parsed=event.occurred_at_parsed,
        supersedes=_ids(args, "supersedes", max_ids),
        downweights=_ids(args, "downweights", max_ids),
    )


def _ids(args: Args, name: str, max_ids: int) -> tuple[int, ...]:
    # 0 or a negative number can name no memory: a mistake, refused rather than "skipped".
    return tuple(
        dict.fromkeys(
            args.id_list(name, max_items=max_ids, over_limit_code=INVALID_INPUT, positive=True)
        )
    )


@command
@dataclass(frozen=True)
class Remember(Command):
    item: RememberItem

    @classmethod
    def parse(cls, raw: object, settings: Settings) -> Remember:
        return cls(
            parse_item(raw, max_chars=settings.max_text_chars, max_ids=settings.max_batch_size)
        )


@command
@dataclass(frozen=True)
class RememberBatch(Command):
    #: In input order; an item that failed validation is its error, reported in its place.
    items: tuple[RememberItem | MemoryServiceError, ...]

    @classmethod
    def parse(cls, raw: object, settings: Settings) -> RememberBatch:
        args = Args(raw)
        raw_items = batch_list(
            args,
            "items",
            settings.max_batch_size,
            over_code=INVALID_INPUT,
            required="The items field is required: an array of memories.",
            noun="entries",
        )
        default_source = args.string("source_provider", max_len=_SHORT_FIELD)
        default_policy = args.choice("dedup_policy", DEDUP_POLICIES, "ask") or "ask"
        return cls(
            parse_each(
                raw_items,
                lambda item: parse_item(
                    item,
                    max_chars=settings.max_text_chars,
                    max_ids=settings.max_batch_size,
                    default_source=default_source,
                    default_policy=default_policy,
                ),
            )
        )
