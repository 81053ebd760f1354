"""The tools that change stored rows: update, confirm, forget (one or many)."""

from __future__ import annotations

from api.mcp import tool_outputs as out
from api.mcp.tool_schemas import DRY_RUN, MEMORY_ID, STRING, Schemas, flag, item_of, retry_as
from api.mcp.tool_spec import ToolSpec
from memory.commands import Confirm, Forget, ForgetBatch, UpdateMemory, UpdateMemoryBatch


def editing_tools(s: Schemas) -> list[ToolSpec]:
    """update_memory(_batch), confirm, forget(_batch)."""
    settings = s.settings
    update_item = s.obj({"id": MEMORY_ID, **s.update_fields()}, required=["id"])
    return [
        ToolSpec(
            name="update_memory",
            title="Edit memory",
            # A secret in the new text is SECRET_REJECTED as in remember, which says so once.
            description=(
                "Correct one memory; omitted fields stay. Forgotten: NOT_FOUND. Kept: refused "
                "(INVALID_INPUT, detail.reason 'locked') unless only keep=false. "
                f"{retry_as('remember')}"
            ),
            input_schema=s.obj({**update_item["properties"], "dry_run": DRY_RUN}, required=["id"]),
            output_schema=out.result(memory_id=out.INT, changed_fields={"type": "array"}),
            command=UpdateMemory,
            queued=True,
            destructive=True,
            idempotent=True,
        ),
        ToolSpec(
            name="update_memory_batch",
            title="Edit many",
            description=(
                f"Correct up to {settings.max_batch_size} memories; prefer it over repeated "
                "update_memory. Items take update_memory's arguments; a failed item fails alone. "
                f"{retry_as('remember')}"
            ),
            input_schema=s.obj(
                {"items": s.batch(item_of(update_item)), "dry_run": DRY_RUN}, required=["items"]
            ),
            output_schema=out.BATCH,
            command=UpdateMemoryBatch,
            queued=True,
            destructive=True,
            idempotent=True,
        ),
        ToolSpec(
            name="confirm",
            title="Confirm memory",
            description=(
                "Mark a memory verified now (last_confirmed_at; positive feedback), when the user "
                f"confirms it or to settle a contradiction. {retry_as('remember')}"
            ),
            input_schema=s.obj({"id": MEMORY_ID}, required=["id"]),
            output_schema=out.result(last_confirmed_at=out.STR),
            command=Confirm,
            queued=True,
            # Each call is another positive feedback step, so not idempotent.
            destructive=False,
            idempotent=False,
        ),
        ToolSpec(
            name="forget",
            title="Forget memory",
            description=(
                "Delete a memory: soft by default (a tombstone warns later remember calls); "
                "hard_delete=true erases it. Kept ones are refused. "
                f"{retry_as('remember')}"
            ),
            input_schema=s.obj(
                {
                    "id": MEMORY_ID,
                    "hard_delete": flag(False),
                    "reason": STRING,
                    "replaced_by_id": MEMORY_ID,
                    "dry_run": DRY_RUN,
                },
                required=["id"],
            ),
            output_schema=out.result(already_deleted=out.BOOL),
            command=Forget,
            queued=True,
            destructive=True,
            idempotent=True,
        ),
        ToolSpec(
            name="forget_batch",
            title="Forget many",
            description=(
                f"Soft-delete up to {settings.max_batch_size} memories; prefer it to calling "
                f"forget repeatedly. A failed id fails alone. {retry_as('remember')}"
            ),
            input_schema=s.obj(
                {"ids": s.batch(MEMORY_ID), "reason": STRING, "dry_run": DRY_RUN},
                required=["ids"],
            ),
            output_schema=out.BATCH,
            command=ForgetBatch,
            queued=True,
            destructive=True,
            idempotent=True,
        ),
    ]
