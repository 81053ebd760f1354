"""The console's tool calls: the MCP tools themselves, called as the console.

Every read and every change the console makes is a tool call through
:meth:`api.mcp.dispatch.McpDispatcher.call_tool`: the same argument checks,
use cases, write queue, idempotency and audit record as a call from an
assistant, so a console edit can never do what a tool could not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api.mcp.dispatch import CallContext, McpDispatcher

#: The ``client_id`` the console's calls are recorded under (the audit log, "memories written").
CONSOLE_CLIENT_ID = "ownsona-console"


@dataclass(frozen=True)
class ToolFailure:
    """A tool's error payload, as the page shows it."""

    code: str
    message: str


class ConsoleTools:
    def __init__(self, dispatcher: McpDispatcher) -> None:
        self._dispatcher = dispatcher

    async def call(
        self,
        user_id: int,
        tool: str,
        arguments: dict[str, Any],
        *,
        key: str | None = None,
        extra_arguments: frozenset[str] = frozenset(),
    ) -> dict[str, Any]:
        """The tool's payload (``ok`` true or false) for ``user_id``.

        ``key`` is the form's idempotency key (``guard.new_operation_key``,
        sent in the form): a form submitted twice is done once.
        """
        spec = self._dispatcher.tool(tool)
        if spec is None:
            raise LookupError(f"no tool {tool!r}")
        ctx = CallContext(user_id=user_id, entry="console", client_id=CONSOLE_CLIENT_ID)
        return await self._dispatcher.call_tool(
            spec, arguments, ctx, key, extra_arguments=extra_arguments
        )


def failure(payload: dict[str, Any]) -> ToolFailure | None:
    """The failure of an error payload, or None when the call succeeded."""
    if payload.get("ok") is True:
        return None
    error = payload.get("error")
    if isinstance(error, dict):
        return ToolFailure(str(error.get("code", "UNKNOWN")), str(error.get("message", "")))
    return ToolFailure("UNKNOWN", "The call failed.")
