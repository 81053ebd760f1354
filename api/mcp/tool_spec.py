"""One MCP tool's entry in the registry, and the annotation sets the tools share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from config.settings import Settings
from memory.commands import Command


@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool: its listing and the command its arguments are parsed into."""

    name: str
    description: str
    input_schema: dict[str, Any]
    #: The success payload or the error payload (``api.mcp.tool_outputs.result``).
    output_schema: dict[str, Any]
    #: MCP ToolAnnotations: title, readOnlyHint, destructiveHint, idempotentHint, openWorldHint.
    annotations: Mapping[str, bool | str]
    #: The command class the tool's arguments are parsed into (``parse``, with the
    #: tool's documented errors); ``memory.handlers.HANDLERS`` names its handler.
    command: type[Command]
    #: True: runs on a worker through ``Runtime.write_queue``; False: inline.
    queued: bool
    #: True: an inline call that embeds a query (recall...): ``api.mcp.admission`` lets
    #: the inline calls that embed nothing go first.
    embeds_query: bool = False

    def parse(self, arguments: dict[str, Any], settings: Settings) -> Command:
        """The call's arguments as this tool's command, or MemoryServiceError."""
        return self.command.parse(arguments, settings)

    @property
    def light(self) -> bool:
        """An inline call that embeds nothing: never made to wait behind query embeddings."""
        return not self.queued and not self.embeds_query

    @property
    def argument_names(self) -> frozenset[str]:
        """The top-level argument names the input schema declares; any other is refused."""
        return frozenset(self.input_schema.get("properties", {}))

    def item_schema(self, field: str) -> dict[str, Any] | None:
        """The schema of one element of the array argument ``field``, if it declares one."""
        prop = self.input_schema.get("properties", {}).get(field, {})
        items = prop.get("items") if prop.get("type") == "array" else None
        return items if isinstance(items, dict) else None

    def listing(self) -> dict[str, Any]:
        """The ``Tool`` object of a ``tools/list`` result."""
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputSchema": self.output_schema,
            "annotations": self.annotations,
        }


def write_hints(*, destructive: bool, idempotent: bool) -> dict[str, bool]:
    """A write tool's hints, every one explicit (the hosts' directories refuse a tool
    that leaves readOnlyHint or destructiveHint to MCP's defaults): not read-only;
    destructive or not; idempotentHint only where true; never open world, since every
    tool touches only the caller's own store."""
    hints = {"readOnlyHint": False, "destructiveHint": destructive}
    if idempotent:
        hints["idempotentHint"] = True
    hints["openWorldHint"] = False
    return hints


#: The hints of every read-only tool. destructiveHint and idempotentHint are
#: "meaningful only when readOnlyHint == false" (MCP, ToolAnnotations): not sent.
#: openWorldHint: false, as every tool reads only the caller's own store.
READ_HINTS = {"readOnlyHint": True, "openWorldHint": False}
