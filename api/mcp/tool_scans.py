"""The cleanup scans: near duplicates and possible conflicts, run on a worker."""

from __future__ import annotations

from api.mcp import tool_outputs as out
from api.mcp.tool_schemas import Schemas
from api.mcp.tool_spec import ToolSpec
from memory.commands import FindConflicts, FindNearDuplicates
from memory.commands.scans import Scan


def scan_tools(s: Schemas) -> list[ToolSpec]:
    """find_near_duplicates and find_conflicts (queued for their size)."""
    return [
        _scan_spec(
            s,
            "find_near_duplicates",
            "Duplicates",
            FindNearDuplicates,
            "Groups of active memories saying nearly the same (cosine >= threshold), for "
            "cleanup with forget_batch.",
            0.92,
        ),
        _scan_spec(
            s,
            "find_conflicts",
            "Conflicts",
            FindConflicts,
            # Which of supersedes and downweights fits is said once, in remember's schema.
            "Memories sharing a tag that may contradict; you judge. reason 'relation': one "
            "fact (e.g. home city) with different values, at any similarity. Fix: confirm, or "
            "remember with supersedes or downweights.",
            0.80,
        ),
    ]


def _scan_spec(
    s: Schemas, name: str, title: str, command: type[Scan], description: str, threshold: float
) -> ToolSpec:
    # Read-only, but a scan over the whole store: it runs on a worker so a
    # large store never ties up the web process.
    return ToolSpec(
        name=name,
        title=title,
        description=description,
        input_schema=s.obj(
            {
                "threshold": {"type": "number", "minimum": 0.5, "maximum": 1, "default": threshold},
                "max_groups": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50},
            }
        ),
        output_schema=out.scan_result(with_reason=command is FindConflicts),
        command=command,
        queued=True,
    )
