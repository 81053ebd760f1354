"""The tools that change stored rows: update, confirm, forget (one or many)."""

from __future__ import annotations

from api.mcp import tool_outputs as out
from api.mcp.tool_schemas import DRY_RUN, MEMORY_ID, STRING, Schemas, flag, item_of, retry_as
from api.mcp.tool_spec import ToolSpec, write_hints
from memory.commands import Confirm, Forget, ForgetBatch, UpdateMemory, UpdateMemoryBatch


def editing_tools(s: Schemas) -> list[ToolSpec]:
    """update_memory(_batch), confirm, forget(_batch)."""
    settings = s.settings
    update_item = s.obj({"id": MEMORY_ID, **s.update_fields()}, required=["id"])
    return [
        ToolSpec(
            "update_memory",
            # A secret in the new text is SECRET_REJECTED as in remember, which says so once.
            "Correct one memory; omitted fields stay. Forgotten: NOT_FOUND. Kept: refused "
            "(INVALID_INPUT, detail.reason 'locked') unless only keep=false. "
            f"{retry_as('remember')}",
            s.obj({**update_item["properties"], "dry_run": DRY_RUN}, required=["id"]),
            out.result(memory_id=out.INT, changed_fields={"type": "array"}),
            write_hints(destructive=True, idempotent=True),
            UpdateMemory,
            queued=True,
        ),
        ToolSpec(
            "update_memory_batch",
            f"Correct up to {settings.max_batch_size} memories; prefer it over repeated "
            "update_memory. Items take update_memory's arguments; a failed item fails alone. "
            f"{retry_as('remember')}",
            s.obj({"items": s.batch(item_of(update_item)), "dry_run": DRY_RUN}, required=["items"]),
            out.BATCH,
            write_hints(destructive=True, idempotent=True),
            UpdateMemoryBatch,
            queued=True,
        ),
        ToolSpec(
            "confirm",
            "Mark a memory verified now (last_confirmed_at; positive feedback), when the user "
            f"confirms it or to settle a contradiction. {retry_as('remember')}",
            s.obj({"id": MEMORY_ID}, required=["id"]),
            out.result(last_confirmed_at=out.STR),
            # Each call is another positive feedback step, so not idempotent.
            write_hints(destructive=False, idempotent=False),
            Confirm,
            queued=True,
        ),
        ToolSpec(
            "forget",
            "Delete a memory: soft by default (a tombstone warns later remember calls); "
            "hard_delete=true erases it. Kept ones are refused. "
            f"{retry_as('remember')}",
            s.obj(
                {
                    "id": MEMORY_ID,
                    "hard_delete": flag(False),
                    "reason": STRING,
                    "replaced_by_id": MEMORY_ID,
                    "dry_run": DRY_RUN,
                },
                required=["id"],
            ),
            out.result(already_deleted=out.BOOL),
            write_hints(destructive=True, idempotent=True),
            Forget,
            queued=True,
        ),
        ToolSpec(
            "forget_batch",
            f"Soft-delete up to {settings.max_batch_size} memories; prefer it to calling "
            f"forget repeatedly. A failed id fails alone. {retry_as('remember')}",
            s.obj(
                {"ids": s.batch(MEMORY_ID), "reason": STRING, "dry_run": DRY_RUN},
                required=["ids"],
            ),
            out.BATCH,
            write_hints(destructive=True, idempotent=True),
            ForgetBatch,
            queued=True,
        ),
    ]
