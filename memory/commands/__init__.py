"""Typed commands: a tool call's arguments, validated and parsed before anything runs.

The API process parses a queued tool's JSON arguments into one of these
frozen dataclasses (:func:`parse_command`), so unknown fields, wrong types and
out-of-range values are refused there, with the tool's own errors, before a
message is queued; the write queue carries the command as plain JSON
(:meth:`Command.to_json`, :func:`from_json`) and the worker's use case
receives the command object. A batch item that fails validation stays in its
batch as its error, so it fails alone, as the batch tools promise.

Siblings: ``codec`` (the base class and its JSON), and one module per family
of tools, like ``api/mcp``'s registry and ``memory``'s use cases.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .codec import REGISTERED, Command, from_json, is_command_json
from .editing import Confirm, Forget, ForgetBatch, UpdateMemory, UpdateMemoryBatch
from .learning import Reinforce
from .remember import Remember, RememberBatch
from .scans import FindConflicts, FindNearDuplicates

if TYPE_CHECKING:
    from config.settings import Settings

__all__ = [
    "COMMANDS",
    "Command",
    "Confirm",
    "FindConflicts",
    "FindNearDuplicates",
    "Forget",
    "ForgetBatch",
    "Reinforce",
    "Remember",
    "RememberBatch",
    "UpdateMemory",
    "UpdateMemoryBatch",
    "as_command",
    "from_json",
    "is_command_json",
    "parse_command",
]

#: The command class of every tool that takes one, by tool name: the family modules
#: above register their classes (``@command``) as they are imported.
COMMANDS: Mapping[str, type[Command]] = REGISTERED


def parse_command(tool: str, raw: object, settings: Settings) -> Command:
    """Validate ``raw`` (a tool's JSON arguments) into ``tool``'s command, or raise.

    Raises :class:`~memory.errors.MemoryServiceError` (INVALID_INPUT and the
    like) exactly as the tool documents; KeyError for a tool without a command.
    """
    return COMMANDS[tool].parse(raw, settings)


def as_command(tool: str, args: Command | Mapping[str, Any] | None, settings: Settings) -> Command:
    """``args`` as ``tool``'s command: a command, a command's JSON, or raw arguments.

    The API sends commands; raw arguments are parsed here for the callers
    that hold JSON arguments (operator scripts, tests, a message queued by an
    older API process).
    """
    if isinstance(args, Command):
        command = args
    elif is_command_json(args):
        assert args is not None
        command = from_json(args)
    else:
        return parse_command(tool, args, settings)
    if tool != command.TOOL:
        raise ValueError(f"a {command.TOOL} command sent to {tool}")
    return command
