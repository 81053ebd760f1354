"""The cleanup scans: near duplicates and possible conflicts, run on a worker."""

from __future__ import annotations

from api.mcp.tool_schemas import DATA_NOT_INSTRUCTIONS, Schemas
from api.mcp.tool_spec import READ_HINTS, ToolSpec


def scan_tools(s: Schemas) -> list[ToolSpec]:
    """find_near_duplicates and find_conflicts (queued for their size)."""
    return [
        _scan_spec(
            s,
            "find_near_duplicates",
            "Find near-duplicate memories",
            "Read-only cleanup check: groups of active memories that say nearly the same thing "
            "(cosine >= threshold, default 0.92; 0.95+ is effectively identical). Groups are "
            "transitive (a~b and b~c put all three together) and listed strongest first, each "
            "with ids, max_similarity, pair_count and the memories. Review them with the user, "
            "then forget_batch the redundant ones. Returns groups and summary {groups, pairs}.",
            0.92,
        ),
        _scan_spec(
            s,
            "find_conflicts",
            "Find possibly conflicting memories",
            "Read-only check: groups of active memories about the same topic (similarity >= "
            "threshold, default 0.80, and at least one shared tag) that may contradict each "
            "other. The server does not judge. Resolve with confirm on the right one, or "
            "remember the correction with supersedes (old one wrong) or downweights (old one "
            "merely outdated). Same output as find_near_duplicates.",
            0.80,
        ),
    ]


def _scan_spec(s: Schemas, name: str, title: str, description: str, threshold: float) -> ToolSpec:
    # Read-only, but a scan over the whole store: it runs on a worker so a
    # large store never ties up the web process.
    return ToolSpec(
        name,
        title,
        f"{description} {DATA_NOT_INSTRUCTIONS}",
        s.obj(
            {
                "threshold": {
                    "type": "number",
                    "minimum": 0.5,
                    "maximum": 1,
                    "default": threshold,
                    "description": "Cosine similarity a pair needs to count.",
                },
                "max_groups": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 500,
                    "default": 50,
                    "description": "Most groups to return.",
                },
            }
        ),
        READ_HINTS,
        name,
        queued=True,
    )
