"""Typed commands: a tool call's arguments, validated and parsed before anything runs.

Every tool's arguments are parsed at the edge (the API's tool registry names
each tool's command class) into one of these frozen dataclasses, so unknown
fields, wrong types and out-of-range values are refused with the tool's own
errors before anything runs, or is queued. The queue carries a command as
plain JSON tagged by its type's name (:meth:`Command.to_json`,
:func:`from_json`); each command type has one handler (``memory.handlers``).
A batch item that fails validation stays in its batch as its error, so it
fails alone, as the batch tools promise.

Siblings: ``codec`` (the base class and its JSON), and one module per family
of tools, like ``api/mcp``'s registry and ``memory``'s use cases.
"""

from __future__ import annotations

from .codec import COMMAND_KEY, REGISTERED, Command, from_json
from .editing import Confirm, Forget, ForgetBatch, UpdateMemory, UpdateMemoryBatch
from .learning import Reinforce
from .reading import (
    BuildContextPrompt,
    CountMemories,
    ExportMemories,
    GetMemory,
    ListMemories,
    ListTags,
    MemoryStats,
    Recall,
    TextSearch,
)
from .relations import QueryRelations
from .remember import Remember, RememberBatch
from .scans import FindConflicts, FindNearDuplicates

__all__ = [
    "COMMAND_KEY",
    "REGISTERED",
    "BuildContextPrompt",
    "Command",
    "Confirm",
    "CountMemories",
    "ExportMemories",
    "FindConflicts",
    "FindNearDuplicates",
    "Forget",
    "ForgetBatch",
    "GetMemory",
    "ListMemories",
    "ListTags",
    "MemoryStats",
    "QueryRelations",
    "Recall",
    "Reinforce",
    "Remember",
    "RememberBatch",
    "TextSearch",
    "UpdateMemory",
    "UpdateMemoryBatch",
    "from_json",
]
