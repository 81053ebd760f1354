"""Which handler runs each command, and whether it only reads: declared once, on the handler.

A use case declares itself with :meth:`Handlers.handles` on its handler::

    @handles(MemoryStats, reads=True)
    async def memory_stats(deps, meta, command): ...

``reads=True`` says the handler changes nothing in the database. Two things
follow from it and from nothing else: the web process may run the command on
a read replica (``bootstrap.read_routing``), and the API lists its tool as
read-only (``api.mcp.tool_spec``). Everything else that maps commands to code
is derived from this registry: ``memory.handlers.HANDLERS`` and
:meth:`Handlers.read_commands`. The API's tool registry checks at startup that
every handled command has a tool and every tool's command a handler.

:data:`HANDLING` is the process's registry, filled as the use-case modules
load (``memory.handlers`` imports them all). A test builds a registry of its
own (``Handlers()``) to declare a throwaway command without touching it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .codec import Command

if TYPE_CHECKING:
    from memory.calls import CallMeta
    from memory.deps import Deps

C = TypeVar("C", bound=Command)
Payload = dict[str, Any]
#: A handler of one command type: its ``{"ok": true, ...}`` payload, or MemoryServiceError.
Handler = Callable[["Deps", "CallMeta", C], Awaitable[Payload]]


@dataclass(frozen=True)
class Handling:
    """One command's handler, and whether it only reads."""

    handler: Handler[Any]
    #: Changes nothing in the database: may run on a replica; its tool is read-only.
    reads: bool


class Handlers:
    """Command type -> :class:`Handling`; a command is declared once (a second is an error)."""

    def __init__(self) -> None:
        self._by_command: dict[type[Command], Handling] = {}

    def handles(self, command: type[C], *, reads: bool) -> Callable[[Handler[C]], Handler[C]]:
        """Declare the decorated function ``command``'s handler (a decorator)."""

        def declare(handler: Handler[C]) -> Handler[C]:
            known = self._by_command.get(command)
            if known is not None:
                raise TypeError(
                    f"{command.__name__} has two handlers: {known.handler.__qualname__} "
                    f"and {handler.__qualname__}"
                )
            self._by_command[command] = Handling(handler, reads)
            return handler

        return declare

    def copy(self) -> Handlers:
        """A registry with the same declarations, to declare more in without touching this one."""
        other = Handlers()
        other._by_command.update(self._by_command)
        return other

    def of(self, command: type[Command]) -> Handling:
        """``command``'s declaration; LookupError naming the command when it has none."""
        handling = self._by_command.get(command)
        if handling is None:
            raise LookupError(
                f"{command.__name__} has no handler: declare one with "
                "@handles(...) in a use-case module that memory/handlers.py imports"
            )
        return handling

    def commands(self) -> frozenset[type[Command]]:
        """Every command that has a handler."""
        return frozenset(self._by_command)

    def table(self) -> Mapping[type[Command], Handler[Any]]:
        """Command type -> handler (a copy)."""
        return {command: h.handler for command, h in self._by_command.items()}

    def read_commands(self) -> tuple[type[Command], ...]:
        """The commands whose handlers only read (for ``isinstance``)."""
        return tuple(command for command, h in self._by_command.items() if h.reads)


#: The process's registry (the use-case modules declare into it as they load).
HANDLING = Handlers()
#: ``@handles(Command, reads=...)``: declare a handler in :data:`HANDLING`.
handles = HANDLING.handles
