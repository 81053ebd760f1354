"""The tool registry: what ``tools/list`` shows and where ``tools/call`` goes.

One :class:`ToolSpec` per tool of the tools chapter (``spec/mcp-tools.texi``),
built by :func:`tool_specs` so the JSON Schema limits follow the settings.
Each family of tools lives in its own module (``tool_remember``,
``tool_reading``, ``tool_editing``, ``tool_learning``, ``tool_scans``: schema,
description and annotations together); this module puts them in the order
``tools/list`` shows them. Whether a use case runs inline or on a Dramatiq
worker is the ``queued`` flag of its entry, and nowhere else (DESIGN,
"Shape"). Adding a tool is one entry in its family and one name in
:data:`TOOL_ORDER`.

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
- The listing is at most 16 KB (issue 14; ``tests/api/test_tools_size.py``):
  it goes into every conversation. Descriptions say when to use a tool and
  its non-obvious rules; what a schema says (types, ranges, enums, defaults)
  is not repeated in prose; the shared sentences (``tool_schemas``) are
  written once.
- Every tool has a human title (``annotations.title``, which every revision
  since 2025-03-26 reads) and explicit hints (``tool_spec``): the hosts'
  directories (Claude's Connectors Directory) refuse tools without them.
"""

from __future__ import annotations

import dataclasses

from api.mcp.tool_editing import editing_tools
from api.mcp.tool_learning import learning_tools
from api.mcp.tool_reading import reading_tools
from api.mcp.tool_remember import remember_tools
from api.mcp.tool_scans import scan_tools
from api.mcp.tool_schemas import DATA_NOT_INSTRUCTIONS, PREFER_RECENT, Schemas, retry_safe
from api.mcp.tool_spec import ToolSpec
from config.settings import Settings

__all__ = [
    "DATA_NOT_INSTRUCTIONS",
    "PREFER_RECENT",
    "TOOL_ORDER",
    "ToolSpec",
    "retry_safe",
    "tool_specs",
]

#: The order of ``tools/list``: writes and their reads interleaved as the chapter lists them.
TOOL_ORDER = (
    "remember",
    "remember_batch",
    "recall",
    "search_memory",
    "build_context_prompt",
    "list_memories",
    "update_memory",
    "update_memory_batch",
    "confirm",
    "forget",
    "forget_batch",
    "text_search",
    "get_memory",
    "count_memories",
    "memory_stats",
    "list_tags",
    "export_memories",
    "reinforce",
    "find_near_duplicates",
    "find_conflicts",
    "query_relations",
)


#: Each tool's human title (``annotations.title``): what a host shows a person.
TOOL_TITLES = {
    "remember": "Remember",
    "remember_batch": "Remember many",
    "recall": "Recall",
    "search_memory": "Search",
    "build_context_prompt": "Prompt",
    "list_memories": "List",
    "update_memory": "Edit memory",
    "update_memory_batch": "Edit many",
    "confirm": "Confirm memory",
    "forget": "Forget memory",
    "forget_batch": "Forget many",
    "text_search": "Text search",
    "get_memory": "Get memory",
    "count_memories": "Count",
    "memory_stats": "Overview",
    "list_tags": "List tags",
    "export_memories": "Export",
    "reinforce": "Rate",
    "find_near_duplicates": "Duplicates",
    "find_conflicts": "Conflicts",
    "query_relations": "Relations",
}


def tool_specs(settings: Settings) -> dict[str, ToolSpec]:
    """Every tool, by name, in the order ``tools/list`` shows them."""
    s = Schemas(settings)
    families = (remember_tools, reading_tools, editing_tools, learning_tools, scan_tools)
    specs = {spec.name: spec for family in families for spec in family(s)}
    if set(specs) != set(TOOL_ORDER):
        raise AssertionError(
            f"TOOL_ORDER and the families disagree: {set(specs) ^ set(TOOL_ORDER)}"
        )
    return {
        name: dataclasses.replace(
            specs[name], annotations={"title": TOOL_TITLES[name], **specs[name].annotations}
        )
        for name in TOOL_ORDER
    }
