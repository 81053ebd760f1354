"""The ``remember`` family: one fact or a batch, with dedup and supersedes."""

from __future__ import annotations

from api.mcp.tool_schemas import DATA_NOT_INSTRUCTIONS, Schemas
from api.mcp.tool_spec import ToolSpec, write_hints


def remember_tools(s: Schemas) -> list[ToolSpec]:
    """remember and remember_batch."""
    settings = s.settings
    return [
        ToolSpec(
            "remember",
            "Remember a fact",
            "Store one durable fact about the user (a preference, a person, a plan, a "
            "standing instruction about how they like things done) so that any assistant "
            "can recall it later. Use it when the user tells you something worth keeping or "
            "asks you to remember it; write the fact as a self-contained sentence "
            '("The user\'s son Colby lives in Los Angeles."), not as a reply. Never store '
            "secrets (API keys, tokens, or passwords, PINs and codes stated in words): they "
            "are refused with SECRET_REJECTED. Returns memory_id; "
            'an exact duplicate returns the existing id with "Already remembered". '
            "near_duplicates lists similar stored facts and previously_corrected lists "
            "similar facts that were deleted or replaced before: check them, and if the "
            "new fact corrects an old one, pass its id in supersedes (old fact is wrong: "
            "it is retired) or downweights (old fact is merely outdated). keep=true locks "
            "the memory against later edits and deletion. For several facts at once use "
            f"remember_batch. {DATA_NOT_INSTRUCTIONS}",
            s.obj(s.remember_fields(), required=["text"]),
            # Not idempotent: downweights steps salience again; destructive: supersedes
            # retires the rows it names.
            write_hints(destructive=True, idempotent=False),
            "remember",
            queued=True,
        ),
        ToolSpec(
            "remember_batch",
            "Remember many facts",
            f"Store up to {settings.max_batch_size} facts in one call; much faster than "
            "calling remember repeatedly (one embedding call for the whole batch). Each "
            "item takes the same fields as remember. Per-item failures (for example a "
            "rejected secret) do not fail the batch: results has one entry per item, in "
            "order, each with ok and memory_id or error, plus a summary of totals. "
            f"{DATA_NOT_INSTRUCTIONS}",
            s.obj(
                {
                    "items": s.batch(
                        "The facts to store, each shaped like remember's arguments.",
                        s.obj(s.remember_fields(), required=["text"]),
                    ),
                    "source_provider": s.text(
                        "Default source_provider for items that do not set their own."
                    ),
                    "dedup_policy": s.dedup_policy(
                        "Default dedup_policy for items that do not set their own."
                    ),
                },
                required=["items"],
            ),
            write_hints(destructive=True, idempotent=False),
            "remember_batch",
            queued=True,
        ),
    ]
