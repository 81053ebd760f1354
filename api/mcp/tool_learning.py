"""``reinforce``: feedback that teaches recall which memories help."""

from __future__ import annotations

from api.mcp import tool_outputs as out
from api.mcp.tool_schemas import MEMORY_ID, Schemas, retry_as
from api.mcp.tool_spec import ToolSpec
from memory.commands import Reinforce


def learning_tools(s: Schemas) -> list[ToolSpec]:
    """reinforce."""
    settings = s.settings
    return [
        ToolSpec(
            name="reinforce",
            title="Rate",
            description=(
                "Teach recall what helps: ids you used, delta +1 helpful to -1 wrong, and the "
                f"query they answered. Only ranking changes. {retry_as('remember')}"
            ),
            input_schema=s.obj(
                {
                    "memory_ids": {
                        "type": "array",
                        "items": MEMORY_ID,
                        "minItems": 1,
                        "maxItems": settings.max_batch_size,
                    },
                    "delta": {"type": "number", "minimum": -1, "maximum": 1, "default": 1},
                    "query": s.memory_text(),
                },
                required=["memory_ids"],
            ),
            output_schema=out.result(reinforced=out.keys("id")),
            command=Reinforce,
            queued=True,
            destructive=False,
            idempotent=False,
        ),
    ]
