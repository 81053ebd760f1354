"""The table of handlers, and the one way to run a command.

Every handler has the signature ``async (deps, meta, command) -> payload``
and either returns its ``{"ok": true, ...}`` payload or raises
:class:`~memory.errors.MemoryServiceError`. Each use case declares its own
handler, once, with ``@handles(Command, reads=...)``
(:mod:`memory.commands.handling`); this module loads every use-case module so
that the table is whole, and :func:`dispatch` looks the handler up by the
command's type. It is the one database-error boundary of every path that runs
a command: the web process (inline tools), the workers (queued tools) and the
commands (chat import, scripts).

Whether a command runs inline or on a worker is the tool registry's decision
(``api/mcp/tool_*.py``), not this module's; which tool names a command is
the registry's too: nothing here knows a tool name.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import psycopg

from storage.sealing.scope import sealing_as

# The use-case modules: loading them declares their handlers (@handles). A new module
# of handlers is added here; the tool registry's startup check names a command left out.
from . import editing, learning, reading, relations, remembering, scans  # noqa: F401
from .call_keys import call_scope
from .calls import CallMeta
from .commands import Command
from .commands.handling import HANDLING, Handler, Payload
from .deps import Deps
from .errors import DATABASE_ERROR, MemoryServiceError

__all__ = [
    "HANDLERS",
    "HANDLING",
    "Handler",
    "Payload",
    "database_error",
    "dispatch",
    "read_commands",
]

_log = logging.getLogger(__name__)

#: Every command type's handler (cosmicpython's ``handlers.py``), as the use cases declare them.
HANDLERS: Mapping[type[Command], Handler[Any]] = HANDLING.table()


def read_commands() -> tuple[type[Command], ...]:
    """The commands whose handlers only read: a replica may serve them."""
    return HANDLING.read_commands()


async def dispatch(deps: Deps, meta: CallMeta, command: Command) -> Payload:
    """Run ``command``'s handler for ``meta``; its payload, or MemoryServiceError.

    The one database-error boundary: a database failure (the transaction has
    rolled back) becomes DATABASE_ERROR, on every path.
    """
    handler = HANDLING.of(type(command)).handler
    try:
        # Sealed at rest: the caller's keys for every statement of the call.
        with sealing_as(await call_scope(deps, meta.user_id)):
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
