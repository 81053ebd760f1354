"""The tool registry: what ``tools/list`` shows and where ``tools/call`` goes.

One :class:`ToolSpec` per tool of the tools chapter (``mcp-tools.texi``, in the
shared folder beside the repository: ``../shared/spec/``),
built by :func:`tool_specs` so the JSON Schema limits follow the settings.
Each family of tools lives in its own module (``tool_remember``,
``tool_reading``, ``tool_editing``, ``tool_learning``, ``tool_scans``: a
family is a function returning its declarations); :data:`FAMILIES` puts them
in the order ``tools/list`` shows them, a tool's place being its place in its
family. A declaration is the only place a tool's wire name, title, schemas,
command and inline-or-queued are written (DESIGN, "Shape"); whether it only
reads is its handler's ``@handles`` (``memory.commands.handling``). Everything
else is derived: the listing and its order, the annotations, the handler table,
the commands a replica may serve, and the tests' lists of tools. Adding a tool:
docs/adding-a-tool.md.

:func:`tool_specs` checks the registry against the handlers when a process
starts, and refuses to start on a disagreement (:class:`RegistryError`): a
tool whose command has no handler, a handled command no tool reaches, a name
declared twice, or a command the queue could not carry.

Schema decisions:

- ``additionalProperties: false`` everywhere. The schemas list every field
  the chapter and SUPPLEMENT §3 document, and a misspelt field ("tag",
  "content") would otherwise be dropped without a word: a client that
  validates refuses it with a message naming the field, so the model can
  correct itself instead of storing less than it meant to.
- An ``outputSchema`` for every tool (``tool_outputs``): the success fields
  and the error object, one open object schema. The payload is sent as
  ``structuredContent`` and, the same JSON, as text in ``content[0]``
  (Claude Code shows the model the first, claude.ai the second).
- The listing has a budget per tool (issue 35, ``tests/api/test_tools_size.py``,
  docs/adding-a-tool.md): it goes into every conversation. Descriptions say
  when to use a tool and its non-obvious rules; what a schema says (types, ranges, enums, defaults)
  is not repeated in prose; the shared sentences (``tool_schemas``) are
  written once.
- Every tool has a human title (``annotations.title``, which every revision
  since 2025-03-26 reads) and explicit hints (``tool_spec``): the hosts'
  directories (Claude's Connectors Directory) refuse tools without them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from api.mcp.tool_editing import editing_tools
from api.mcp.tool_learning import learning_tools
from api.mcp.tool_reading import lookup_tools, recall_tools, relation_tools
from api.mcp.tool_remember import remember_tools
from api.mcp.tool_scans import scan_tools
from api.mcp.tool_schemas import DATA_NOT_INSTRUCTIONS, PREFER_RECENT, Schemas, retry_safe
from api.mcp.tool_spec import ToolSpec
from config.settings import Settings
from memory.commands import REGISTERED
from memory.commands.handling import Handlers
from memory.handlers import HANDLING

__all__ = [
    "DATA_NOT_INSTRUCTIONS",
    "FAMILIES",
    "PREFER_RECENT",
    "RegistryError",
    "ToolSpec",
    "retry_safe",
    "tool_specs",
]

#: A family of tools: its declarations, built from the settings' schema limits.
Family = Callable[[Schemas], list[ToolSpec]]

#: The order of ``tools/list``: writes and their reads interleaved as the chapter lists them.
FAMILIES: tuple[Family, ...] = (
    remember_tools,
    recall_tools,
    editing_tools,
    lookup_tools,
    learning_tools,
    scan_tools,
    relation_tools,
)


class RegistryError(RuntimeError):
    """The tool declarations and the handlers disagree: the process must not start."""


def tool_specs(
    settings: Settings,
    families: Sequence[Family] = FAMILIES,
    handlers: Handlers = HANDLING,
) -> dict[str, ToolSpec]:
    """Every tool, by name, in the order ``tools/list`` shows them, each with its
    handler's read-or-write; RegistryError when declarations and handlers disagree.

    ``families`` and ``handlers`` are the process's own; a test passes others to
    declare a throwaway tool without touching them.
    """
    s = Schemas(settings)
    specs: dict[str, ToolSpec] = {}
    problems: list[str] = []
    for family in families:
        for spec in family(s):
            if spec.name in specs:
                problems.append(f"the tool name {spec.name!r} is declared twice")
                continue
            try:
                reads = handlers.of(spec.command).reads
            except LookupError as ex:
                problems.append(f"tool {spec.name!r}: {ex}")
                continue
            specs[spec.name] = dataclasses.replace(spec, reads=reads)
    problems += _disagreements(specs, handlers)
    if problems:
        raise RegistryError("the tool registry disagrees with itself: " + "; ".join(problems))
    return specs


def _disagreements(specs: dict[str, ToolSpec], handlers: Handlers) -> list[str]:
    problems = []
    reached = {spec.command for spec in specs.values()}
    for command in sorted(handlers.commands() - reached, key=lambda c: c.__name__):
        problems.append(f"{command.__name__} has a handler but no tool declares it")
    for spec in specs.values():
        if REGISTERED.get(spec.command.type_name()) is not spec.command:
            # The queue carries a command by its type name; the worker decodes it by that.
            problems.append(f"tool {spec.name!r}: {spec.command.__name__} lacks @command")
        if spec.read_only and (spec.destructive or spec.idempotent):
            problems.append(f"tool {spec.name!r} only reads: it has no write hints")
    return problems
