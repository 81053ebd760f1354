"""The read tools: recall and its relatives, listings, counts, stats, export, relations."""

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
from api.mcp.tool_spec import READ_HINTS, ToolSpec
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


def reading_tools(s: Schemas) -> list[ToolSpec]:
    """The read-only tools that run inline in the web process."""
    settings = s.settings
    return [
        _recall_spec(s, "recall"),
        _recall_spec(s, "search_memory"),
        ToolSpec(
            "build_context_prompt",
            "A prompt for a model without this server: memories relevant to user_prompt, up "
            "to max_chars, then the prompt. Here, use recall.",
            s.obj(
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
            out.result(prompt=out.STR),
            READ_HINTS,
            BuildContextPrompt,
            queued=False,
            embeds_query=True,
        ),
        ToolSpec(
            "list_memories",
            f"Page through memories, newest first; filters combine with AND. {DATA_NOT_INSTRUCTIONS}",
            s.obj({"limit": s.limit(20), "offset": count(0, 0), **s.cleanup_filters()}),
            out.result(memories=out.ROWS),
            READ_HINTS,
            ListMemories,
            queued=False,
        ),
        ToolSpec(
            "text_search",
            "Case-insensitive substring search, newest first; for questions use recall. "
            f"{DATA_NOT_INSTRUCTIONS}",
            s.obj({"text": TEXT, "limit": s.limit(20)}, required=["text"]),
            out.result(memories=out.ROWS),
            READ_HINTS,
            TextSearch,
            queued=False,
        ),
        ToolSpec(
            "get_memory",
            f"One memory by id with every field, soft-deleted too. {DATA_NOT_INSTRUCTIONS}",
            s.obj({"id": MEMORY_ID}, required=["id"]),
            out.result(memory={"required": ["id", "text"]}),
            READ_HINTS,
            GetMemory,
            queued=False,
        ),
        ToolSpec(
            "count_memories",
            "Count memories; filters as list_memories'.",
            s.obj({**s.cleanup_filters(), "tags": TAGS, "source_provider": STRING}),
            out.result(count=out.INT),
            READ_HINTS,
            CountMemories,
            queued=False,
        ),
        ToolSpec(
            "memory_stats",
            "Store-wide counts, average importance, dates, top tags and sources.",
            s.obj({}),
            out.result(active=out.INT),
            READ_HINTS,
            MemoryStats,
            queued=False,
        ),
        ToolSpec(
            "list_tags",
            "Tags in use with counts, most used first: reuse their spellings.",
            s.obj({"include_deleted": flag(False), "limit": count(1)}),
            out.result(tags=out.keys("tag", "count")),
            READ_HINTS,
            ListTags,
            queued=False,
        ),
        ToolSpec(
            "export_memories",
            "Every memory, oldest first, for a backup the user asked for; LIMIT_EXCEEDED over "
            "the cap.",
            s.obj({"include_deleted": flag(True)}),
            out.result(memories=out.ROWS),
            READ_HINTS,
            ExportMemories,
            queued=False,
        ),
        ToolSpec(
            "query_relations",
            "Multi-hop questions ('who is my manager's spouse?') over relations found in "
            "memories; entity: a name, 'me' or a role ('my manager'). Empty: use recall. "
            f"{DATA_NOT_INSTRUCTIONS}",
            s.obj(
                {
                    "entity": {**TEXT, "maxLength": 500},
                    "max_hops": {"type": "integer", "minimum": 1, "maximum": 5, "default": 2},
                },
                required=["entity"],
            ),
            out.result(relations=out.keys("subject", "predicate", "object")),
            READ_HINTS,
            QueryRelations,
            queued=False,
        ),
    ]


def _recall_spec(s: Schemas, name: str) -> ToolSpec:
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
        name,
        f"{intro} {DATA_NOT_INSTRUCTIONS}",
        s.obj(
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
        out.result(matches=out.ROWS),
        READ_HINTS,
        Recall,
        queued=False,
        embeds_query=True,
    )
