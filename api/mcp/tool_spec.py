"""One MCP tool's declaration: everything the server knows of a tool, in one place.

A tool is declared once, as a :class:`ToolSpec` in its family's module
(``api/mcp/tool_*.py``): its wire name and title, its description and schemas,
the command its arguments are parsed into, and whether it runs inline or on a
worker. Whether it only reads is its handler's declaration
(``@handles(Command, reads=...)``, :mod:`memory.commands.handling`), which the
registry (``api.mcp.tools.tool_specs``) copies in: the annotations follow from
it, so a tool cannot be listed read-only while its handler writes, nor the
reverse. Recipe: docs/adding-a-tool.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from config.settings import Settings
from memory.commands import Command


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    """One MCP tool: its listing and the command its arguments are parsed into."""

    #: The wire name (``tools/call``'s ``name``): written here and nowhere else.
    name: str
    #: The human title (``annotations.title``): what a host shows a person.
    title: str
    description: str
    input_schema: dict[str, Any]
    #: The success payload or the error payload (``api.mcp.tool_outputs.result``).
    output_schema: dict[str, Any]
    #: The command class the tool's arguments are parsed into (``parse``, with the
    #: tool's documented errors); its handler is declared with ``@handles``.
    command: type[Command]
    #: True: runs on a worker through ``Runtime.write_queue``; False: inline.
    queued: bool
    #: True: an inline call that embeds a query (recall...): ``api.mcp.admission`` lets
    #: the inline calls that embed nothing go first.
    embeds_query: bool = False
    #: A write's hints (MCP ToolAnnotations): it may delete or overwrite what the
    #: user stored; calling it twice with the same arguments does no more than once.
    destructive: bool = False
    idempotent: bool = False
    #: Whether the command's handler only reads: copied from its ``@handles``
    #: declaration by the registry (``tool_specs``); None until then.
    reads: bool | None = None

    def parse(self, arguments: dict[str, Any], settings: Settings) -> Command:
        """The call's arguments as this tool's command, or MemoryServiceError."""
        return self.command.parse(arguments, settings)

    @property
    def read_only(self) -> bool:
        """The handler changes nothing (``readOnlyHint``; the read scope suffices)."""
        if self.reads is None:
            raise ValueError(f"{self.name}: not built by the registry (api.mcp.tools)")
        return self.reads

    @property
    def annotations(self) -> dict[str, bool | str]:
        """MCP ToolAnnotations: title, readOnlyHint, destructiveHint, idempotentHint,
        openWorldHint; every hint derived from the declaration."""
        if self.read_only:
            return {"title": self.title, **READ_HINTS}
        return {
            "title": self.title,
            **write_hints(destructive=self.destructive, idempotent=self.idempotent),
        }

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
