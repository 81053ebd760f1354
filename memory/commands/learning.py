"""``reinforce``: feedback on memories, parsed (SUPPLEMENT §4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memory.errors import LIMIT_EXCEEDED, invalid
from memory.rules.inputs import Args
from memory.rules.text import clean_text

from .codec import Command, command

if TYPE_CHECKING:
    from config.settings import Settings


@command
@dataclass(frozen=True)
class Reinforce(Command):
    #: Duplicates collapsed, first-seen order kept.
    memory_ids: tuple[int, ...]
    delta: float
    query: str | None

    @classmethod
    def parse(cls, raw: object, settings: Settings) -> Reinforce:
        args = Args(raw)
        ids = args.id_list(
            "memory_ids",
            required=True,
            max_items=settings.max_batch_size,
            over_limit_code=LIMIT_EXCEEDED,
            allow_empty=False,
        )
        for value in ids:
            if value < 1:
                raise invalid(
                    f"memory_ids must hold positive memory ids; got {value}.", field="memory_ids"
                )
        delta = args.number("delta", default=1.0, minimum=-1.0, maximum=1.0)
        assert delta is not None
        query = None
        if args.has("query"):
            query = clean_text(args.raw("query"), field="query", max_chars=settings.max_text_chars)
        return cls(tuple(dict.fromkeys(ids)), delta, query)
