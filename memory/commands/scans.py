"""``find_near_duplicates`` and ``find_conflicts``: the scans' two knobs, parsed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from memory.rules.inputs import Args

from .codec import Command, command

if TYPE_CHECKING:
    from config.settings import Settings

DEFAULT_MAX_GROUPS = 50
#: The chapter: "hard cap 500" with INVALID_INPUT for an out-of-range max_groups.
MAX_GROUPS_CAP = 500
MIN_THRESHOLD = 0.5
NEAR_DUPLICATE_THRESHOLD = 0.92
CONFLICT_THRESHOLD = 0.80


@dataclass(frozen=True)
class Scan(Command):
    #: The threshold when the call names none.
    DEFAULT_THRESHOLD: ClassVar[float]
    #: Whether a qualifying pair must share a tag (conflicts) or not (near duplicates).
    SHARED_TAG: ClassVar[bool]

    threshold: float
    max_groups: int

    @classmethod
    def parse(cls, raw: object, settings: Settings) -> Scan:
        args = Args(raw)
        threshold = args.number(
            "threshold", default=cls.DEFAULT_THRESHOLD, minimum=MIN_THRESHOLD, maximum=1.0
        )
        max_groups = args.integer(
            "max_groups", default=DEFAULT_MAX_GROUPS, minimum=1, maximum=MAX_GROUPS_CAP
        )
        assert threshold is not None and max_groups is not None
        return cls(threshold, max_groups)


@command
@dataclass(frozen=True)
class FindNearDuplicates(Scan):
    DEFAULT_THRESHOLD = NEAR_DUPLICATE_THRESHOLD
    SHARED_TAG = False


@command
@dataclass(frozen=True)
class FindConflicts(Scan):
    DEFAULT_THRESHOLD = CONFLICT_THRESHOLD
    SHARED_TAG = True
