"""The read tools: recall and its relatives, listings, counts, stats, export, relations.

Three families, as ``tools/list`` shows them between the writes (``api.mcp.tools``):
:func:`recall_tools`, :func:`lookup_tools` and :func:`relation_tools`.
"""

from __future__ import annotations

from api.mcp import tool_outputs as out
from api.mcp.tool_schemas import (
    AS_OF,
    DATA_NOT_INSTRUCTIONS,
    MEMORY_ID,
    PREFER_RECENT,
    STRING,
    TAGS,
    TEXT,
    UNIT,
    Schemas,
    count,
    flag,
)
from api.mcp.tool_spec import ToolSpec
from memory.commands import (
    BuildContextPrompt,
    CountMemories,
    ExportMemories,
    GetMemory,
    ListMemories,
    ListTags,
    MemoryStats,
    QueryRelations,
    Recall,
    TextSearch,
)


def recall_tools(s: Schemas) -> list[ToolSpec]:
    """recall, search_memory, build_context_prompt and list_memories (inline)."""
    settings = s.settings
    return [
        _recall_spec(s, "recall", "Recall"),
        _recall_spec(s, "search_memory", "Search"),
        ToolSpec(
            name="build_context_prompt",
            title="Prompt",
            description=(
                "A prompt for a model without this server: memories relevant to user_prompt, "
                "up to max_chars, then the prompt. Here, use recall."
            ),
            input_schema=s.obj(
                {
                    "user_prompt": TEXT,
                    "limit": s.limit(settings.default_recall_limit),
                    "max_chars": count(1),
                    "min_score": UNIT,
                    "tags": TAGS,
                    "as_of": AS_OF,
                },
                required=["user_prompt"],
            ),
            output_schema=out.result(prompt=out.STR),
            command=BuildContextPrompt,
            queued=False,
            embeds_query=True,
        ),
        ToolSpec(
            name="list_memories",
            title="List",
            description=(
                f"Page through memories, newest first; filters combine with AND. "
                f"{DATA_NOT_INSTRUCTIONS}"
            ),
            input_schema=s.obj(
                {"limit": s.limit(20), "offset": count(0, 0), **s.cleanup_filters()}
            ),
            output_schema=out.result(memories=out.ROWS),
            command=ListMemories,
            queued=False,
        ),
    ]


def lookup_tools(s: Schemas) -> list[ToolSpec]:
    """text_search, get_memory, count_memories, memory_stats, list_tags, export_memories."""
    return [
        ToolSpec(
            name="text_search",
            title="Text search",
            description=(
                "Case-insensitive substring search, newest first; for questions use recall. "
                f"{DATA_NOT_INSTRUCTIONS}"
            ),
            input_schema=s.obj({"text": TEXT, "limit": s.limit(20)}, required=["text"]),
            output_schema=out.result(memories=out.ROWS),
            command=TextSearch,
            queued=False,
        ),
        ToolSpec(
            name="get_memory",
            title="Get memory",
            description=f"One memory by id with every field, soft-deleted too. {DATA_NOT_INSTRUCTIONS}",
            input_schema=s.obj({"id": MEMORY_ID}, required=["id"]),
            output_schema=out.result(memory={"required": ["id", "text"]}),
            command=GetMemory,
            queued=False,
        ),
        ToolSpec(
            name="count_memories",
            title="Count",
            description="Count memories; filters as list_memories'.",
            input_schema=s.obj({**s.cleanup_filters(), "tags": TAGS, "source_provider": STRING}),
            output_schema=out.result(count=out.INT),
            command=CountMemories,
            queued=False,
        ),
        ToolSpec(
            name="memory_stats",
            title="Overview",
            description="Store-wide counts, average importance, dates, top tags and sources.",
            input_schema=s.obj({}),
            output_schema=out.result(active=out.INT),
            command=MemoryStats,
            queued=False,
        ),
        ToolSpec(
            name="list_tags",
            title="List tags",
            description="Tags in use with counts, most used first: reuse their spellings.",
            input_schema=s.obj({"include_deleted": flag(False), "limit": count(1)}),
            output_schema=out.result(tags=out.keys("tag", "count")),
            command=ListTags,
            queued=False,
        ),
        ToolSpec(
            name="export_memories",
            title="Export",
            description=(
                "Every memory, oldest first, for a backup the user asked for; LIMIT_EXCEEDED "
                "over the cap."
            ),
            input_schema=s.obj({"include_deleted": flag(True)}),
            output_schema=out.result(memories=out.ROWS),
            command=ExportMemories,
            queued=False,
        ),
    ]


def relation_tools(s: Schemas) -> list[ToolSpec]:
    """query_relations (inline)."""
    return [
        ToolSpec(
            name="query_relations",
            title="Relations",
            description=(
                "Multi-hop questions ('who is my manager's spouse?') over relations found in "
                "memories; entity: a name, 'me' or a role ('my manager'). Empty: use recall. "
                f"{DATA_NOT_INSTRUCTIONS}"
            ),
            input_schema=s.obj(
                {
                    "entity": {**TEXT, "maxLength": 500},
                    "max_hops": {"type": "integer", "minimum": 1, "maximum": 5, "default": 2},
                },
                required=["entity"],
            ),
            output_schema=out.result(relations=out.keys("subject", "predicate", "object")),
            command=QueryRelations,
            queued=False,
        ),
    ]


def _recall_spec(s: Schemas, name: str, title: str) -> ToolSpec:
    # recall and search_memory are one tool under two names (tools chapter,
    # search_memory): some clients' tool search does not surface "recall". The
    # alias says when to use it; how to weigh contradictions is recall's (the
    # chapter's) and the server instructions'.
    intro = (
        "Find memories relevant to a question, before answering anything that may depend on "
        "the user. Times in it (in 2021, last March) count from "
        f"as_of, default now. score: cosine. {PREFER_RECENT}"
        if name == "recall"
        else "Same as recall: memories relevant to a question, before answering anything personal."
    )
    return ToolSpec(
        name=name,
        title=title,
        description=f"{intro} {DATA_NOT_INSTRUCTIONS}",
        input_schema=s.obj(
            {
                "query": TEXT,
                "limit": s.limit(s.settings.default_recall_limit),
                "min_score": UNIT,
                "tags": TAGS,
                "explain": flag(False),
                "as_of": AS_OF,
            },
            required=["query"],
        ),
        output_schema=out.result(matches=out.ROWS),
        command=Recall,
        queued=False,
        embeds_query=True,
    )
