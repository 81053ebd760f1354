"""Tool calls by name, for tests that run the handlers without the MCP transport.

The API maps a tool's name and arguments to its command (the registry's
``ToolSpec.command``); this does the same with the same registry, then runs
the command through ``memory.handlers.dispatch`` as the dispatcher or a
worker does. ``USE_CASES[tool](deps, user_id, args, idempotency_key=...)``
keeps the shape the tests were written in.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from api.mcp.tools import tool_specs
from config.settings import Settings
from memory.calls import CallMeta
from memory.commands import Command, from_json
from memory.deps import Deps
from memory.errors import MemoryServiceError
from memory.handlers import dispatch
from memory.writers import Writer
from memory.writes import IdempotencyKey

#: Every tool's command class, by tool name (the registry's own mapping).
COMMAND_OF: dict[str, type[Command]] = {
    name: spec.command for name, spec in tool_specs(Settings()).items()
}

#: The tool of a queued command (each queued tool has a command class of its own).
TOOL_OF: dict[type[Command], str] = {command: name for name, command in COMMAND_OF.items()}


def command_of(tool: str, args: Any, settings: Settings) -> Command:
    """``args`` (a tool's JSON arguments, or already its command) as ``tool``'s command."""
    if isinstance(args, Command):
        return args
    return COMMAND_OF[tool].parse(args, settings)


async def run_tool(
    deps: Deps,
    user_id: int,
    tool: str,
    args: Any,
    *,
    idempotency_key: str | IdempotencyKey | None = None,
    writer: Writer | None = None,
) -> dict[str, Any]:
    """Parse ``args`` as ``tool``'s command and run it for ``user_id``."""
    command = command_of(tool, args, deps.settings)
    key = IdempotencyKey(idempotency_key) if isinstance(idempotency_key, str) else idempotency_key
    meta = CallMeta(user_id, writer=writer, idempotency_key=key)
    return await dispatch(deps, meta, command)


class _ByName:
    def __getitem__(self, tool: str) -> Callable[..., Awaitable[dict[str, Any]]]:
        if tool not in COMMAND_OF:
            raise KeyError(tool)

        async def run(deps: Deps, user_id: int, args: Any, **kwargs: Any) -> dict[str, Any]:
            return await run_tool(deps, user_id, tool, args, **kwargs)

        return run

    def __contains__(self, tool: object) -> bool:
        return tool in COMMAND_OF

    def __iter__(self) -> Iterator[str]:
        return iter(COMMAND_OF)


#: ``USE_CASES[tool](deps, user_id, args, idempotency_key=None, writer=None)``.
USE_CASES = _ByName()


def parse_command(tool: str, raw: object, settings: Settings) -> Command:
    """``tool``'s command from its JSON arguments, as the dispatcher parses it."""
    return COMMAND_OF[tool].parse(raw, settings)


def meta_for(user_id: int, key: str | None = None, *, writer: Writer | None = None) -> CallMeta:
    """The metadata the dispatcher builds for a queued call: one submission of ``key``."""
    return CallMeta(
        user_id,
        writer=writer,
        idempotency_key=IdempotencyKey(key).submitted() if key is not None else None,
    )


class InlineWriteQueue:
    """A write queue that runs each command here, as a worker does: the metadata and the
    command go through their JSON first, and a domain error comes back as its payload."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        #: The tool of every submission, in order.
        self.submitted: list[str] = []

    async def submit(self, meta: CallMeta, command: Command) -> dict[str, Any]:
        self.submitted.append(TOOL_OF[type(command)])
        decoded = from_json(command.to_json())
        try:
            return await dispatch(self._deps, CallMeta.from_json(meta.to_json()), decoded)
        except MemoryServiceError as ex:
            return ex.to_payload()
