"""Typed reads of a tool's JSON arguments; every failure is INVALID_INPUT naming the field.

Pure: standard library and ``memory.errors`` only. JSON has one number type,
so an integral float (``5.0``) is accepted where an integer is asked for, but
a boolean is never a number.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from memory.errors import INVALID_INPUT, LIMIT_EXCEEDED, MemoryServiceError, invalid
from memory.rules.text import reject_unstorable

#: An unknown name is quoted back at most this long: it is the client's text.
_NAME_CHARS = 60


def reject_unknown(raw: object, known: Iterable[str]) -> None:
    """Refuse an arguments object carrying a name outside ``known``.

    The schemas say ``additionalProperties: false``; a misspelt field
    ("dryRun") silently dropped would make the call do something else than
    asked (forget for real instead of a dry run), so it is INVALID_INPUT
    naming the field, with the closest known name when one is close. Names
    are checked in the order sent, so the first unknown one is reported; a
    non-object is left to :class:`Args`, which refuses it.
    """
    if not isinstance(raw, Mapping):
        return
    names = frozenset(known)
    for name in raw:
        if name not in names:
            raise unknown_field(str(name), sorted(names))


def unknown_field(name: str, known: list[str]) -> MemoryServiceError:
    """INVALID_INPUT for ``name``, suggesting the closest of ``known`` (difflib) if any."""
    shown = name if len(name) <= _NAME_CHARS else name[:_NAME_CHARS] + "..."
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if not close:
        # "dryRun" vs "dry_run": compare spellings without case and separators too.
        folded = {_fold(k): k for k in known}
        close = [
            folded[m] for m in difflib.get_close_matches(_fold(name), list(folded), n=1, cutoff=0.6)
        ]
    if close:
        hint = f"did you mean {close[0]}?"
    elif known:
        hint = f"known fields: {', '.join(known)}."
    else:
        hint = "this tool takes no arguments."
    detail: dict[str, Any] = {"field": shown}
    if close:
        detail["suggestion"] = close[0]
    return MemoryServiceError(INVALID_INPUT, f"Unknown field {shown!r}; {hint}", detail)


def _fold(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")


class Args:
    """A tool's ``arguments`` object with typed, validating getters."""

    def __init__(self, raw: object) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise invalid("Tool arguments must be a JSON object.")
        self._raw: Mapping[str, Any] = raw

    def has(self, name: str) -> bool:
        return name in self._raw and self._raw[name] is not None

    def present(self, name: str) -> bool:
        """True when the key was sent at all, even as null (null may mean "clear")."""
        return name in self._raw

    def raw(self, name: str) -> Any:
        return self._raw.get(name)

    def _value(self, name: str, *, required: bool) -> Any:
        """The value sent for ``name``, None when absent or null (refused when ``required``)."""
        value = self._raw.get(name)
        if value is None and required:
            raise invalid(f"The {name} field is required.", field=name)
        return value

    def string(self, name: str, *, required: bool = False, max_len: int = 1000) -> str | None:
        value = self._value(name, required=required)
        if value is None:
            return None
        if not isinstance(value, str):
            raise invalid(f"{name} must be a string.", field=name)
        if len(value) > max_len:
            raise invalid(f"{name} must be at most {max_len} characters.", field=name)
        reject_unstorable(value, field=name)
        return value

    def choice(self, name: str, choices: tuple[str, ...], default: str | None) -> str | None:
        value = self.string(name, max_len=100)
        if value is None:
            return default
        if value not in choices:
            raise invalid(f"{name} must be one of: {', '.join(choices)}.", field=name)
        return value

    def boolean(self, name: str, default: bool = False) -> bool:
        value = self._raw.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise invalid(f"{name} must be true or false.", field=name)
        return value

    def integer(
        self,
        name: str,
        *,
        required: bool = False,
        default: int | None = None,
        minimum: int | None = None,
        maximum: int | None = None,
        cap: int | None = None,
    ) -> int | None:
        """An integer; ``maximum`` refuses larger values, ``cap`` silently clamps them."""
        value = self._value(name, required=required)
        if value is None:
            return default
        number = as_integer(value, name)
        if minimum is not None and number < minimum:
            raise invalid(f"{name} must be at least {minimum}.", field=name)
        if maximum is not None and number > maximum:
            raise invalid(f"{name} must be at most {maximum}.", field=name)
        if cap is not None and number > cap:
            number = cap
        return number

    def number(
        self, name: str, *, default: float | None, minimum: float, maximum: float
    ) -> float | None:
        value = self._raw.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise invalid(f"{name} must be a number.", field=name)
        try:
            number = float(value)
        except OverflowError:  # an integer too large for a float is out of range anyway
            number = math.inf
        if not math.isfinite(number) or not minimum <= number <= maximum:
            raise invalid(f"{name} must be between {minimum:g} and {maximum:g}.", field=name)
        return number

    def id_list(
        self,
        name: str,
        *,
        required: bool = False,
        max_items: int,
        over_limit_code: str = LIMIT_EXCEEDED,
        allow_empty: bool = True,
        positive: bool = False,
    ) -> list[int]:
        """A list of integer ids; ``positive`` refuses 0 and below (memory ids start at 1)."""
        value = self.array(
            name,
            max_items=max_items,
            over_limit_code=over_limit_code,
            required=f"The {name} field is required." if required else None,
            kind="an array of integer ids",
            allow_empty=allow_empty,
            per_call="are allowed per call",
        )
        ids = [as_integer(v, name) for v in value]
        if positive:
            for number in ids:
                if number < 1:
                    raise invalid(
                        f"{name} must hold positive memory ids; got {number}.", field=name
                    )
        return ids

    def array(
        self,
        name: str,
        *,
        max_items: int,
        over_limit_code: str = LIMIT_EXCEEDED,
        required: str | None = None,
        kind: str = "an array",
        allow_empty: bool = True,
        noun: str = "items",
        per_call: str = "per call",
    ) -> list[Any]:
        """A JSON array of at most ``max_items`` elements, left unchecked ([] when absent).

        ``required`` is the message for a missing array (None: optional);
        ``kind``, ``noun`` and ``per_call`` word the other refusals the way
        each tool has always worded them.
        """
        value = self._raw.get(name)
        if value is None:
            if required is not None:
                raise invalid(required, field=name)
            return []
        if not isinstance(value, list):
            raise invalid(f"{name} must be {kind}.", field=name)
        if not value and not allow_empty:
            raise invalid(f"{name} must not be empty.", field=name)
        if len(value) > max_items:
            raise MemoryServiceError(
                over_limit_code,
                f"{name} has {len(value)} {noun}; at most {max_items} {per_call}.",
                {"field": name, "limit": max_items},
            )
        return value


def batch_list(
    args: Args,
    name: str,
    limit: int,
    *,
    over_code: str,
    required: str,
    kind: str = "an array",
    noun: str = "items",
) -> list[Any]:
    """The non-empty array a batch tool works through (``items``, ``ids``), at most ``limit``."""
    return args.array(
        name,
        max_items=limit,
        over_limit_code=over_code,
        required=required,
        kind=kind,
        allow_empty=False,
        noun=noun,
    )


T = TypeVar("T")


def parse_each(
    values: Iterable[object], parse: Callable[[object], T]
) -> tuple[T | MemoryServiceError, ...]:
    """``parse`` of each batch entry, in order; an entry it refuses is its error, in its place.

    The batch tools report per item, so one bad entry fails alone.
    """
    parsed: list[T | MemoryServiceError] = []
    for value in values:
        try:
            parsed.append(parse(value))
        except MemoryServiceError as ex:
            parsed.append(ex)
    return tuple(parsed)


def as_integer(value: object, name: str) -> int:
    if isinstance(value, bool):
        raise invalid(f"{name} must be an integer.", field=name)
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    else:
        raise invalid(f"{name} must be an integer.", field=name)
    if not -(2**63) <= number < 2**63:
        raise invalid(f"{name} is out of range.", field=name)
    return number


def memory_id(args: Args, name: str = "id") -> int:
    """A memory id: a positive 64-bit integer."""
    value = args.integer(name, required=True)
    assert value is not None
    if value < 1:
        raise invalid(f"{name} must be a positive integer memory id.", field=name)
    return value
