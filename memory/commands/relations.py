"""``query_relations``: an entity and how far to walk from it, parsed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memory.errors import invalid
from memory.rules.inputs import Args

from .codec import Command, command

if TYPE_CHECKING:
    from config.settings import Settings

DEFAULT_HOPS = 2
MAX_HOPS = 5
ENTITY_CHARS = 500


@command
@dataclass(frozen=True)
class QueryRelations(Command):
    entity: str
    max_hops: int

    @classmethod
    def parse(cls, raw: object, settings: Settings) -> QueryRelations:
        args = Args(raw)
        entity = args.string("entity", required=True, max_len=ENTITY_CHARS)
        assert entity is not None
        if not entity.strip():
            raise invalid(
                "entity must not be empty: name a person, place, thing or 'me'.", field="entity"
            )
        hops = args.integer("max_hops", default=DEFAULT_HOPS, minimum=1, cap=MAX_HOPS)
        assert hops is not None
        return cls(entity, hops)
