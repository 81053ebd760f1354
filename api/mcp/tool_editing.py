"""The tools that change stored rows: update, confirm, forget (one or many)."""

from __future__ import annotations

from api.mcp.tool_schemas import Schemas
from api.mcp.tool_spec import ToolSpec, write_hints


def editing_tools(s: Schemas) -> list[ToolSpec]:
    """update_memory(_batch), confirm, forget(_batch)."""
    settings = s.settings
    return [
        ToolSpec(
            "update_memory",
            "Update a memory",
            "Correct one stored memory in place: replace its text, tags, importance, "
            "expires_at or last_confirmed_at. Omitted fields stay unchanged; tags, when given, "
            "replace the whole list. Supply at least one field besides id. To only mark a "
            "fact as still true, use confirm instead. A soft-deleted memory cannot be updated "
            "(NOT_FOUND): remember it again. A memory with keep=true is locked (INVALID_INPUT, "
            'detail.reason "locked"); the only change it accepts is keep=false on its own. '
            "dry_run=true reports changed_fields without writing. A text holding a secret "
            "(even a password or PIN stated in words) is refused with SECRET_REJECTED. For "
            "several memories use update_memory_batch.",
            s.obj(
                {"id": s.memory_id(), **s.update_fields(), "dry_run": s.dry_run()},
                required=["id"],
            ),
            write_hints(destructive=True, idempotent=True),
            "update_memory",
            queued=True,
        ),
        ToolSpec(
            "update_memory_batch",
            "Update many memories",
            f"Correct up to {settings.max_batch_size} memories in one call. Prefer this over "
            "calling update_memory repeatedly whenever you fix more than one memory (for "
            "example a bulk re-tagging: metadata-only items do not re-embed anything). Each "
            "item is id plus at least one of text, tags, importance, expires_at, "
            "last_confirmed_at, keep. Per-item failures do not fail the batch: results has one "
            "entry per item with input_index, ok and changed_fields or error, plus a summary. "
            "dry_run=true reports without writing.",
            s.obj(
                {
                    "items": s.batch(
                        "The edits, each an id plus the fields to change.",
                        s.obj({"id": s.memory_id(), **s.update_fields()}, required=["id"]),
                    ),
                    "dry_run": s.dry_run(),
                },
                required=["items"],
            ),
            write_hints(destructive=True, idempotent=True),
            "update_memory_batch",
            queued=True,
        ),
        ToolSpec(
            "confirm",
            "Confirm a memory is still true",
            "Mark one memory as verified now: sets last_confirmed_at to the current time "
            "(without touching its text) and counts as positive feedback for ranking. Use it "
            "when the user confirms a remembered fact still holds, or to settle which of two "
            "contradictory memories is current. Returns memory_id and last_confirmed_at.",
            s.obj({"id": s.memory_id()}, required=["id"]),
            # Each call is another positive feedback step, so not idempotent.
            write_hints(destructive=False, idempotent=False),
            "confirm",
            queued=True,
        ),
        ToolSpec(
            "forget",
            "Forget a memory",
            "Delete one memory. By default a soft delete: the row is hidden from recall, "
            "listing and search but kept as a tombstone that warns future remember calls "
            "(previously_corrected), with an optional reason and replaced_by_id. "
            "hard_delete=true erases the row and everything derived from it for good (no "
            "reason or replaced_by_id then). Memories with keep=true are locked and refused. "
            "dry_run=true reports what would happen without changing anything. To delete "
            "several memories, prefer forget_batch over repeated forget calls.",
            s.obj(
                {
                    "id": s.memory_id(),
                    "hard_delete": s.boolean(
                        "Erase the row completely instead of leaving a tombstone.", False
                    ),
                    "reason": s.text(
                        "Why it is forgotten (stored as forget_reason). Not with hard_delete."
                    ),
                    "replaced_by_id": {
                        **s.memory_id(),
                        "description": "Id of the memory replacing this one. Not with hard_delete.",
                    },
                    "dry_run": s.dry_run(),
                },
                required=["id"],
            ),
            write_hints(destructive=True, idempotent=True),
            "forget",
            queued=True,
        ),
        ToolSpec(
            "forget_batch",
            "Forget many memories",
            f"Soft-delete up to {settings.max_batch_size} memories by id in one call. "
            "Strongly prefer this over calling forget repeatedly during cleanup: one call, and "
            "it carries only ids. Soft delete only (use forget with hard_delete=true to erase "
            "a single row). Per-item failures (unknown id, locked memory) do not fail the "
            "batch: results has one entry per id with input_index, ok, already_deleted or "
            "error, plus a summary. dry_run=true reports without changing anything.",
            s.obj(
                {
                    "ids": s.batch("Ids of the memories to forget.", s.memory_id()),
                    "reason": s.text("Shared reason recorded on every forgotten row."),
                    "dry_run": s.dry_run(),
                },
                required=["ids"],
            ),
            write_hints(destructive=True, idempotent=True),
            "forget_batch",
            queued=True,
        ),
    ]
