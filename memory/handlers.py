"""One handler per command type, the table of them, and the one way to run a command.

Every handler has the signature ``async (deps, meta, command) -> payload``
and either returns its ``{"ok": true, ...}`` payload or raises
:class:`~memory.errors.MemoryServiceError`. :func:`dispatch` looks the
handler up by the command's type and is the one database-error boundary of
every path that runs a command: the web process (inline tools), the workers
(queued tools) and the commands (chat import, scripts).

Whether a command runs inline or on a worker is the tool registry's decision
(``api/mcp/tool_*.py``), not this module's; which tool names a command is
the registry's too: nothing here knows a tool name.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import psycopg

from . import commands, editing, learning, reading, relations, remembering, scans
from .calls import CallMeta
from .commands import Command
from .deps import Deps
from .errors import DATABASE_ERROR, MemoryServiceError

C = TypeVar("C", bound=Command)
Payload = dict[str, Any]
#: A handler of one command type.
Handler = Callable[[Deps, CallMeta, C], Awaitable[Payload]]

_log = logging.getLogger(__name__)

#: Every command type's handler (cosmicpython's ``handlers.py``): one row per command.
HANDLERS: Mapping[type[Command], Handler[Any]] = {
    commands.Remember: remembering.remember,
    commands.RememberBatch: remembering.remember_batch,
    commands.Recall: reading.recall,
    commands.BuildContextPrompt: reading.build_context_prompt,
    commands.ListMemories: reading.list_memories,
    commands.TextSearch: reading.text_search,
    commands.GetMemory: reading.get_memory,
    commands.CountMemories: reading.count_memories,
    commands.MemoryStats: reading.memory_stats,
    commands.ListTags: reading.list_tags,
    commands.ExportMemories: reading.export_memories,
    commands.UpdateMemory: editing.update_memory,
    commands.UpdateMemoryBatch: editing.update_memory_batch,
    commands.Confirm: editing.confirm,
    commands.Forget: editing.forget,
    commands.ForgetBatch: editing.forget_batch,
    commands.Reinforce: learning.reinforce,
    commands.FindNearDuplicates: scans.find_near_duplicates,
    commands.FindConflicts: scans.find_conflicts,
    commands.QueryRelations: relations.query_relations,
}


async def dispatch(deps: Deps, meta: CallMeta, command: Command) -> Payload:
    """Run ``command``'s handler for ``meta``; its payload, or MemoryServiceError.

    The one database-error boundary: a database failure (the transaction has
    rolled back) becomes DATABASE_ERROR, on every path.
    """
    handler = HANDLERS[type(command)]
    try:
        return await handler(deps, meta, command)
    except MemoryServiceError:
        raise
    except psycopg.Error as ex:
        raise database_error(ex, type(command).__name__) from ex


def database_error(ex: psycopg.Error, what: str) -> MemoryServiceError:
    """DATABASE_ERROR for a failure of the database (logged with its class, never its text)."""
    _log.error("database error in %s: %s", what, type(ex).__name__)
    return MemoryServiceError(
        DATABASE_ERROR,
        # Not "nothing was changed": a connection lost during COMMIT (a failover) leaves
        # the outcome unknown to us; the write's receipt makes the retry safe either way.
        "The database failed to complete the request. Try again: repeating the same call "
        "is safe and never stores a write twice.",
        {"sqlstate": getattr(ex, "sqlstate", None)},
    )
