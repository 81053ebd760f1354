"""The ``remember`` family: one fact or a batch, with dedup and supersedes."""

from __future__ import annotations

from api.mcp import tool_outputs as out
from api.mcp.tool_schemas import DEDUP_POLICY, STRING, Schemas, item_of, retry_as
from api.mcp.tool_spec import ToolSpec
from memory.commands import Remember, RememberBatch

#: near_duplicates and previously_corrected entries (``memory.remembering._item_outcome``).
_NEAR = out.keys("id", "text", "score")


def remember_tools(s: Schemas) -> list[ToolSpec]:
    """remember and remember_batch."""
    settings = s.settings
    item = s.obj(s.remember_fields(), required=["text"])
    return [
        ToolSpec(
            name="remember",
            title="Remember",
            description="Store a lasting fact the user states about themselves or asks you to keep, as one "
            "self-contained sentence. Never secrets (keys, passwords): SECRET_REJECTED. If it "
            "corrects a memory in near_duplicates or previously_corrected, pass its id in "
            "supersedes or downweights. "
            f"{s.retry_safe}",
            input_schema=item,
            output_schema=out.result(memory_id=out.INT, near_duplicates=_NEAR),
            command=Remember,
            queued=True,
            # destructiveHint true, honestly: a plain remember only adds a row, but the
            # same call with supersedes soft-deletes (retires) the memories it names, and
            # with downweights ranks them lower: it can change and hide older memories, so
            # a host should treat it as it treats forget. Not idempotent: a repeat with
            # downweights steps salience again (a retry within the window is answered from
            # the first call's receipt, but the hint describes the tool, not our retries).
            destructive=True,
        ),
        ToolSpec(
            name="remember_batch",
            title="Remember many",
            description=f"Store up to {settings.max_batch_size} facts. Items take remember's "
            "arguments (source_provider, dedup_policy here are defaults); a failed item fails "
            f"alone. {retry_as('remember')}",
            input_schema=s.obj(
                {
                    "items": s.batch(item_of(item)),
                    "source_provider": STRING,
                    "dedup_policy": DEDUP_POLICY,
                },
                required=["items"],
            ),
            output_schema=out.result(results=out.keys("ok")),
            command=RememberBatch,
            queued=True,
            # As remember: its items may carry supersedes and downweights.
            destructive=True,
        ),
    ]
