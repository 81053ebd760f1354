"""The read tools: recall and its relatives, listings, counts, stats, export, relations."""

from __future__ import annotations

from api.mcp.tool_schemas import DATA_NOT_INSTRUCTIONS, PREFER_RECENT, Schemas
from api.mcp.tool_spec import READ_HINTS, ToolSpec


def reading_tools(s: Schemas) -> list[ToolSpec]:
    """The read-only tools that run inline in the web process."""
    settings = s.settings
    return [
        _recall_spec(s, "recall", "Recall memories"),
        _recall_spec(s, "search_memory", "Search memory"),
        ToolSpec(
            "build_context_prompt",
            "Build a prompt with remembered facts",
            "Assemble a ready-to-send prompt: the stored facts most relevant to user_prompt "
            "in a fixed envelope, followed by the user's prompt. Meant for handing context to "
            "a model that has no access to this server; in your own conversation prefer "
            "recall. Facts are packed greedily by relevance up to max_chars (at least one is "
            f"included when any matched). Returns prompt. {DATA_NOT_INSTRUCTIONS}",
            s.obj(
                {
                    "user_prompt": s.text("The user's actual question.", min_length=1),
                    "limit": s.limit("Most facts to include.", settings.default_recall_limit),
                    "max_chars": s.integer("Hard cap on the prompt's length in characters.", 1),
                    "min_score": s.score(),
                    "tags": s.tags("Only facts with at least one of these tags."),
                },
                required=["user_prompt"],
            ),
            READ_HINTS,
            "build_context_prompt",
            queued=False,
        ),
        ToolSpec(
            "list_memories",
            "List memories",
            "Page through stored memories, newest first, for review, audit and cleanup. "
            "Optional filters (combined with AND) narrow to untagged rows, very short or very "
            "long rows, or rows not confirmed since a date; count_memories takes the same "
            "filters, to size a cleanup before listing it. include_deleted also shows "
            "soft-deleted and expired rows. Returns memories (recall's row shape without score) "
            f"and count. {DATA_NOT_INSTRUCTIONS}",
            s.obj(
                {
                    "limit": s.limit("Rows per page.", 20),
                    "offset": s.integer("Rows to skip, for paging.", 0, default=0),
                    **s.cleanup_filters(),
                }
            ),
            READ_HINTS,
            "list_memories",
            queued=False,
        ),
        ToolSpec(
            "text_search",
            "Find memories containing text",
            "Case-insensitive substring search over memory text, for when you know a word or "
            "name that appears in the memory (use recall for questions and topics). Returns "
            f"memories, newest first, in list_memories' row shape. {DATA_NOT_INSTRUCTIONS}",
            s.obj(
                {
                    "text": s.text("The substring to look for.", min_length=1),
                    "limit": s.limit("Most rows to return.", 20),
                },
                required=["text"],
            ),
            READ_HINTS,
            "text_search",
            queued=False,
        ),
        ToolSpec(
            "get_memory",
            "Get one memory",
            "Fetch one memory by id with all its fields, including soft-deleted rows and their "
            "tombstone details (deleted_at, forget_reason, replaced_by_id). Use it to inspect a "
            "row that recall, list_memories or a near_duplicates list pointed to. Returns "
            f"memory, or NOT_FOUND. {DATA_NOT_INSTRUCTIONS}",
            s.obj({"id": s.memory_id()}, required=["id"]),
            READ_HINTS,
            "get_memory",
            queued=False,
        ),
        ToolSpec(
            "count_memories",
            "Count memories",
            "Count stored memories, optionally filtered (same filters as list_memories, plus "
            "tags and source_provider). Cheap: use it before a bulk operation to see how many "
            "rows it would touch. Returns count.",
            s.obj(
                {
                    **s.cleanup_filters(),
                    "tags": s.tags("Count memories with at least one of these tags."),
                    "source_provider": s.text("Count only memories from this source_provider."),
                }
            ),
            READ_HINTS,
            "count_memories",
            queued=False,
        ),
        ToolSpec(
            "memory_stats",
            "Memory statistics",
            "Summarise the whole memory store: total, active, soft-deleted and expired counts, "
            "average importance, oldest and newest creation time, top tags and counts per "
            "source_provider. Takes no arguments.",
            s.obj({}),
            READ_HINTS,
            "memory_stats",
            queued=False,
        ),
        ToolSpec(
            "list_tags",
            "List tags",
            "List the tags in use with how many memories carry each, most used first. Use it "
            "to pick existing tags when remembering or filtering, instead of inventing new "
            "spellings.",
            s.obj(
                {
                    "include_deleted": s.boolean(
                        "Also count tags of soft-deleted and expired memories.", False
                    ),
                    "limit": s.integer("Most tags to return (capped by the server).", 1),
                }
            ),
            READ_HINTS,
            "list_tags",
            queued=False,
        ),
        ToolSpec(
            "export_memories",
            "Export all memories",
            "Dump every memory of the user as JSON, oldest first, for backup or migration "
            "(no embedding vectors). Large: use it only when the user asks for an export, not "
            "to answer questions. Fails with LIMIT_EXCEEDED when the store is larger than the "
            f"server's export cap. Returns count and memories. {DATA_NOT_INSTRUCTIONS}",
            s.obj(
                {
                    "include_deleted": s.boolean(
                        "Include soft-deleted and expired memories (the full history).", True
                    )
                }
            ),
            READ_HINTS,
            "export_memories",
            queued=False,
        ),
        ToolSpec(
            "query_relations",
            "Query the relation graph",
            "Answer connected, multi-hop questions ('who is my manager's spouse?') from the "
            "relation graph extracted in the background from stored memories. entity is the "
            "starting point: a name, 'me', or a role phrase ('my manager', 'my manager's "
            "husband', 'Dana's husband'), matched case-insensitively. max_hops (default 2, at "
            "most 5) is how many links to follow. Returns relations (subject, predicate, "
            "object, source_memory_id, source_text), nearest first. No LLM call. If nothing "
            f"comes back, fall back to recall. {DATA_NOT_INSTRUCTIONS}",
            s.obj(
                {
                    "entity": {
                        **s.text("Who or what to start from.", min_length=1),
                        "maxLength": 500,
                    },
                    "max_hops": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 5,
                        "default": 2,
                        "description": "How many links to follow (1 = direct relations only).",
                    },
                },
                required=["entity"],
            ),
            READ_HINTS,
            "query_relations",
            queued=False,
        ),
    ]


def _recall_spec(s: Schemas, name: str, title: str) -> ToolSpec:
    # recall and search_memory are one tool under two names (tools chapter,
    # search_memory): some clients' tool search does not surface "recall".
    alias = (
        " Same tool as recall, under a verb-led name."
        if name == "search_memory"
        else " search_memory is the same tool."
    )
    return ToolSpec(
        name,
        title,
        "Find stored memories about the user that are relevant to a question or topic "
        "(meaning and exact words both count: names, numbers and rare words in the query help "
        "find the memories that contain them). Use it before answering anything that may "
        "depend on the user's personal context: people, preferences, plans, history. Returns "
        "matches, best first, each with id, text, score (cosine similarity, 0-1), tags and "
        f"created_at / updated_at / last_confirmed_at.{alias} {PREFER_RECENT} "
        f"{DATA_NOT_INSTRUCTIONS}",
        s.obj(
            {
                "query": s.text("The question or topic, in natural language.", min_length=1),
                "limit": s.limit("Most matches to return.", s.settings.default_recall_limit),
                "min_score": s.score(),
                "tags": s.tags("Only memories with at least one of these tags."),
                "explain": s.boolean(
                    "Add to each match an explain object with the parts of its ranking: cosine, "
                    "lexical share and rank, fused score and rank, salience and context "
                    "contributions.",
                    False,
                ),
            },
            required=["query"],
        ),
        READ_HINTS,
        name,
        queued=False,
    )
