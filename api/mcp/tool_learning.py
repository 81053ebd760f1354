"""``reinforce``: feedback that teaches recall which memories help."""

from __future__ import annotations

from api.mcp.tool_schemas import Schemas
from api.mcp.tool_spec import ToolSpec, write_hints


def learning_tools(s: Schemas) -> list[ToolSpec]:
    """reinforce."""
    settings = s.settings
    return [
        ToolSpec(
            "reinforce",
            "Reinforce helpful memories",
            "Give feedback on memories you used so recall learns which ones help. Pass the ids "
            "that helped (or hurt), usually from recall or search_memory, with delta +1 "
            "(helpful, the default) down to -1 (unhelpful or wrong), and the query they "
            "answered. Positive feedback raises them and, with a query, teaches them that kind "
            "of question, so they rank higher for similar queries; negative feedback ranks "
            "them lower. Only the order changes: reported scores stay raw similarity, and "
            "nothing decays with time. Never edits or deletes, and works on kept memories. At "
            f"most {settings.max_batch_size} ids; duplicates count once. Returns reinforced "
            "(id, salience, use_count, context_count) and skipped (unknown, forgotten or "
            "expired ids).",
            s.obj(
                {
                    "memory_ids": {
                        **s.ids("Ids of the memories the feedback is about."),
                        "minItems": 1,
                        "maxItems": settings.max_batch_size,
                    },
                    "delta": {
                        "type": "number",
                        "minimum": -1,
                        "maximum": 1,
                        "default": 1,
                        "description": "+1 helpful ... -1 unhelpful or wrong.",
                    },
                    "query": {
                        **s.text(
                            "The question these memories answered; teaches context on "
                            "positive feedback.",
                            min_length=1,
                        ),
                        "maxLength": settings.max_text_chars,
                    },
                },
                required=["memory_ids"],
            ),
            write_hints(destructive=False, idempotent=False),
            "reinforce",
            queued=True,
        ),
    ]
