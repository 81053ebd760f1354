"""Commands as plain JSON, for the queue: ``{"command": <type name>, field: value, ...}``.

A command crosses the queue between the API process that parsed it and the
worker that runs it; it is tagged by its command type's name (``"Remember"``),
never by a tool name, and the worker looks its handler up by that type, and Dramatiq's encoder is JSON (STYLE §3.8). The values
a command holds are JSON values plus a few typed ones, each written as an
object tagged with ``"type"`` so the worker gets back exactly what the API
parsed:

- a nested command part (a batch item) → ``{"type": <class>, "fields": {...}}``;
- a :class:`~datetime.datetime` → ``{"type": "datetime", "value": <ISO 8601>}``;
- a per-item :class:`~memory.errors.MemoryServiceError` →
  ``{"type": "error", "code", "message", "detail"}``;
- any other object (a field map, a client's own JSON echoed back) →
  ``{"type": "map", "value": {...}}``, so no client value is ever read as a tag.

Lists come back as lists, except where the field's type says tuple (read from
the resolved type hints, ``tuple[int, ...]`` or ``tuple[...] | None``, never
from the annotation's text). A field with a default or a default factory that
a message lacks (one written by an older version, still queued across an
upgrade) takes that default.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from memory.errors import MemoryServiceError

if TYPE_CHECKING:
    from config.settings import Settings

#: The key naming the command type of a command's JSON.
COMMAND_KEY = "command"

_PARTS: dict[str, type[Any]] = {}
#: Every command class, by its type name: filled by :func:`command` as the family modules load.
REGISTERED: dict[str, type[Command]] = {}

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Command:
    """A tool call's arguments, validated and parsed at the edge (the API process)."""

    @classmethod
    def parse(cls, raw: object, settings: Settings) -> Command:
        """Validate a tool's JSON arguments into this command, or raise MemoryServiceError.

        The errors are the tool's documented ones (INVALID_INPUT and the like).
        """
        raise NotImplementedError(f"{cls.__name__} does not say how it is parsed")

    @classmethod
    def type_name(cls) -> str:
        """The name the command's JSON is tagged with (and its write receipt labelled by)."""
        return cls.__name__

    def to_json(self) -> dict[str, Any]:
        """The command as plain JSON, ``{"command": <type name>, field: value, ...}``."""
        return {COMMAND_KEY: self.type_name(), **_fields(self)}


C = TypeVar("C", bound=Command)


def command(cls: type[C]) -> type[C]:
    """Register a :class:`Command` subclass under its type name (a class decorator)."""
    REGISTERED[cls.type_name()] = cls
    return cls


def part(cls: type[T]) -> type[T]:
    """Register a dataclass a command holds (a batch item) so it can be decoded."""
    _PARTS[cls.__name__] = cls
    return cls


def from_json(data: Mapping[str, Any]) -> Command:
    """The command :meth:`Command.to_json` wrote; ValueError for anything else."""
    name = data.get(COMMAND_KEY)
    cls = REGISTERED.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"not a command: {name!r}")
    return _build(cls, {k: v for k, v in data.items() if k != COMMAND_KEY})


def _fields(obj: Any) -> dict[str, Any]:
    return {f.name: _encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)}


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, datetime):
        return {"type": "datetime", "value": value.isoformat()}
    if isinstance(value, MemoryServiceError):
        return {
            "type": "error",
            "code": value.code,
            "message": value.message,
            "detail": _encode(value.detail),
        }
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, Mapping):
        return {"type": "map", "value": {str(k): _encode(v) for k, v in value.items()}}
    if dataclasses.is_dataclass(value) and type(value).__name__ in _PARTS:
        return {"type": type(value).__name__, "fields": _fields(value)}
    raise TypeError(f"a command cannot carry a {type(value).__name__}")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, Mapping):
        return value
    kind = value["type"]
    if kind == "datetime":
        return datetime.fromisoformat(value["value"])
    if kind == "error":
        return MemoryServiceError(value["code"], value["message"], _decode(value["detail"]))
    if kind == "map":
        return {k: _decode(v) for k, v in value["value"].items()}
    return _build(_PARTS[kind], value["fields"])


def _build(cls: type[T], fields: Mapping[str, Any]) -> T:
    hints = _field_types(cls)
    values = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name not in fields and (
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        ):
            # Sent before this field existed (a message queued across an upgrade): the
            # dataclass fills in its default, or calls its default factory.
            continue
        values[f.name] = _as_declared(_decode(fields[f.name]), hints[f.name])
    return cls(**values)


def _field_types(cls: type[Any]) -> dict[str, Any]:
    """The resolved type of each field (the annotations are strings: postponed evaluation)."""
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


#: Resolved once per class: the classes are fixed once their modules have loaded.
_HINTS: dict[type[Any], dict[str, Any]] = {}


def _as_declared(value: Any, hint: Any) -> Any:
    """A decoded list as the tuple its field declares (``tuple[X, ...]``, also inside ``| None``)."""
    if not isinstance(value, list):
        return value
    for option in _options(hint):
        if typing.get_origin(option) is tuple or option is tuple:
            args = typing.get_args(option)
            if len(args) == 2 and args[1] is Ellipsis:
                return tuple(_as_declared(v, args[0]) for v in value)
            if args and len(args) == len(value):
                return tuple(_as_declared(v, a) for v, a in zip(value, args, strict=True))
            return tuple(value)
    return value


def _options(hint: Any) -> tuple[Any, ...]:
    """The members of a union (``X | None``, ``Optional[X]``), or the type itself."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)
