"""``update_memory(_batch)``, ``confirm``, ``forget(_batch)``: changes to stored rows.

Locked rows (``keep``) refuse every change but unlocking (SUPPLEMENT §3);
soft-deleted rows answer NOT_FOUND to updates (the chapter: forget and re-add).
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

import numpy as np
import psycopg

from memory.rules import ranking
from memory.rules.event_dates import event_date
from memory.rules.timestamps import format_timestamp
from storage import memories as store
from storage.rows import MemoryRow

from .calls import CallMeta
from .commands.editing import (
    UPDATE_FIELDS,
    Confirm,
    Forget,
    ForgetBatch,
    UpdateMemory,
    UpdateMemoryBatch,
    UpdateRequest,
)
from .commands.handling import handles
from .deps import Deps
from .errors import INVALID_INPUT, MemoryServiceError, failed_item, invalid, not_found
from .relations import text_stored
from .writes import run_write


def locked_error(memory_id_: int, action: str) -> MemoryServiceError:
    return MemoryServiceError(
        INVALID_INPUT,
        f"Memory {memory_id_} is kept (locked) and cannot be {action}. "
        "Unlock it first with update_memory and keep: false.",
        {"reason": "locked", "id": memory_id_},
    )


def _item_result(index: int, memory_id_: Any, **fields: Any) -> dict[str, Any]:
    """One item that succeeded, in a batch's ``results``."""
    return {"input_index": index, "id": memory_id_, "ok": True, **fields}


def _batch_payload(dry_run: bool, results: list[dict[str, Any]], **counts: int) -> dict[str, Any]:
    """A batch's success payload: every item's result and the summary's ``counts``."""
    return {
        "ok": True,
        "dry_run": dry_run,
        "results": results,
        "summary": {"total": len(results), **counts},
    }


# --- update ------------------------------------------------------------------


async def _update_one(
    conn: psycopg.AsyncConnection,
    deps: Deps,
    user_id: int,
    request: UpdateRequest,
    embedding: np.ndarray | None,
    *,
    dry_run: bool,
) -> list[str]:
    rows = await store.get_memories_for_update(conn, user_id, [request.id])
    row = rows.get(request.id)
    if row is None or row.deleted_at is not None:
        raise not_found(request.id)
    if row.keep and request.changes != {"keep": False}:
        raise locked_error(request.id, "updated")
    if request.normalized_text is not None:
        clash = (await store.find_exact(conn, user_id, [request.normalized_text])).get(
            request.normalized_text
        )
        if clash is not None and clash.id != row.id:
            raise invalid(
                f"Memory {clash.id} already holds this text; forget one of the two instead.",
                reason="duplicate",
                existing_id=clash.id,
            )
    _check_span(request, row)
    changed = [f for f in UPDATE_FIELDS if f in request.changes]
    if dry_run:
        return changed
    columns = dict(request.changes)
    if "text" in columns:
        columns["normalized_text"] = request.normalized_text
        columns["embedding"] = embedding
        columns["embedding_provider"] = deps.embedder.provider
        columns["embedding_model"] = deps.embedder.model
    columns.update(_occurred_at(request, row))
    await store.update_fields(conn, user_id, row.id, columns)
    return changed


def _check_span(request: UpdateRequest, row: MemoryRow) -> None:
    """valid_from after valid_to, counting the row's end the update leaves, is refused."""
    changes = request.changes
    if "valid_from" not in changes and "valid_to" not in changes:
        return
    start = changes.get("valid_from", row.valid_from)
    end = changes.get("valid_to", row.valid_to)
    if start is not None and end is not None and start > end:
        field = "valid_from" if "valid_from" in changes else "valid_to"
        raise invalid(
            f"valid_from would be after valid_to ({format_timestamp(start)} > "
            f"{format_timestamp(end)}); set both, or clear one with null.",
            field=field,
        )


def _occurred_at(request: UpdateRequest, row: MemoryRow) -> dict[str, Any]:
    """The occurred_at columns an update writes.

    Given by the caller (a time or null): that, never read from the text again. Else a
    new text is read for its date (memory.rules.event_dates, relative dates counting
    from the row's created_at) when the row has no occurred_at or had it from its old
    text; a time a caller once gave stays.
    """
    if "occurred_at" in request.changes:
        return {"occurred_at_parsed": False}
    if "text" not in request.changes or (
        row.occurred_at is not None and not row.occurred_at_parsed
    ):
        return {}
    # In UTC days, as when it was stored without a reference_time (whatever the
    # connection's time zone hands created_at back in).
    parsed = event_date(request.changes["text"], row.created_at.astimezone(UTC))
    return {"occurred_at": parsed, "occurred_at_parsed": parsed is not None}


@handles(UpdateMemory, reads=False)
async def update_memory(deps: Deps, meta: CallMeta, command: UpdateMemory) -> dict[str, Any]:
    user_id, idempotency_key = meta.user_id, meta.idempotency_key
    request, dry_run = command.request, command.dry_run
    embedding = None
    if "text" in request.changes and not dry_run:
        embedding = (await deps.embedder.embed([request.changes["text"]]))[0]

    async def work(conn: psycopg.AsyncConnection) -> dict[str, Any]:
        changed = await _update_one(conn, deps, user_id, request, embedding, dry_run=dry_run)
        return {
            "ok": True,
            "memory_id": request.id,
            "dry_run": dry_run,
            "changed_fields": changed,
            "message": "Would update" if dry_run else "Ok",
        }

    payload = await run_write(
        deps, user_id, command.type_name(), None if dry_run else idempotency_key, work
    )
    if "text" in request.changes and not dry_run:
        # Committed: re-extract its relations (unless the text was the same: nothing owed).
        await text_stored(deps, user_id, [request.id], owed_only=True)
    return payload


@handles(UpdateMemoryBatch, reads=False)
async def update_memory_batch(
    deps: Deps, meta: CallMeta, command: UpdateMemoryBatch
) -> dict[str, Any]:
    user_id, idempotency_key = meta.user_id, meta.idempotency_key
    dry_run = command.dry_run
    parsed = list(command.items)
    # One embedder call for every item that brings new text.
    texts = [
        i for i, p in enumerate(parsed) if isinstance(p, UpdateRequest) and "text" in p.changes
    ]
    embeddings: dict[int, np.ndarray] = {}
    if texts and not dry_run:
        try:
            vectors = await deps.embedder.embed([parsed[i].changes["text"] for i in texts])  # type: ignore[union-attr]
            embeddings = {i: vectors[n] for n, i in enumerate(texts)}
        except MemoryServiceError as ex:
            for i in texts:
                parsed[i] = ex

    async def work(conn: psycopg.AsyncConnection) -> dict[str, Any]:
        results = []
        for index, request in enumerate(parsed):
            if isinstance(request, MemoryServiceError):
                item_id = command.item_ids[index]
                results.append(failed_item(request, input_index=index, id=item_id))
                continue
            try:
                async with conn.transaction():  # a savepoint: one item's failure spares the rest
                    changed = await _update_one(
                        conn, deps, user_id, request, embeddings.get(index), dry_run=dry_run
                    )
                results.append(
                    _item_result(
                        index,
                        request.id,
                        changed_fields=changed,
                        message="Would update" if dry_run else "Ok",
                    )
                )
            except MemoryServiceError as ex:
                results.append(failed_item(ex, input_index=index, id=request.id))
        updated = sum(1 for r in results if r["ok"])
        return _batch_payload(dry_run, results, updated=updated, errors=len(results) - updated)

    payload = await run_write(
        deps, user_id, command.type_name(), None if dry_run else idempotency_key, work
    )
    if not dry_run:  # committed: re-extract the relations of every changed text
        await text_stored(
            deps,
            user_id,
            [r["id"] for r in payload["results"] if r["ok"] and "text" in r["changed_fields"]],
            owed_only=True,
        )
    return payload


# --- confirm -----------------------------------------------------------------


@handles(Confirm, reads=False)
async def confirm(deps: Deps, meta: CallMeta, command: Confirm) -> dict[str, Any]:
    user_id, idempotency_key = meta.user_id, meta.idempotency_key
    mid = command.id

    async def work(conn: psycopg.AsyncConnection) -> dict[str, Any]:
        row = (await store.get_memories_for_update(conn, user_id, [mid])).get(mid)
        if row is None or row.deleted_at is not None:
            raise not_found(mid)
        # confirm is positive feedback (SUPPLEMENT §4); the keep lock does not apply.
        salience = ranking.next_salience(row.salience, ranking.CONFIRM_DELTA)
        confirmed_at = await store.confirm(conn, user_id, mid, salience)
        return {"ok": True, "memory_id": mid, "last_confirmed_at": format_timestamp(confirmed_at)}

    return await run_write(deps, user_id, command.type_name(), idempotency_key, work)


# --- forget ------------------------------------------------------------------


def _forget_message(*, dry_run: bool, already: bool, hard: bool = False) -> str:
    if dry_run:
        if hard:
            return "Would hard-delete"
        return "Would update tombstone (already soft-deleted)" if already else "Would soft-delete"
    if hard:
        return "Forgotten permanently"
    return "Tombstone updated" if already else "Forgotten"


@handles(Forget, reads=False)
async def forget(deps: Deps, meta: CallMeta, command: Forget) -> dict[str, Any]:
    user_id, idempotency_key = meta.user_id, meta.idempotency_key
    mid, hard, dry_run = command.id, command.hard_delete, command.dry_run
    replaced_by = command.replaced_by_id

    async def work(conn: psycopg.AsyncConnection) -> dict[str, Any]:
        ids = [mid] if replaced_by is None else [mid, replaced_by]
        rows = await store.get_memories_for_update(conn, user_id, ids)
        row = rows.get(mid)
        if row is None:
            raise not_found(mid)
        if replaced_by is not None and replaced_by not in rows:
            raise invalid(
                f"replaced_by_id {replaced_by} is not one of your memories.", field="replaced_by_id"
            )
        if row.keep:
            raise locked_error(mid, "forgotten")
        already = row.deleted_at is not None
        if hard and not dry_run:
            await store.hard_delete(conn, user_id, mid)
        elif not dry_run:
            await store.soft_delete(
                conn,
                user_id,
                [mid],
                reason=command.reason,
                replaced_by_id=replaced_by,
                keep_existing_metadata=already,
            )
        return {
            "ok": True,
            "memory_id": mid,
            "dry_run": dry_run,
            "already_deleted": already,
            "hard_deleted": hard,
            "message": _forget_message(dry_run=dry_run, already=already, hard=hard),
        }

    return await run_write(
        deps, user_id, command.type_name(), None if dry_run else idempotency_key, work
    )


@handles(ForgetBatch, reads=False)
async def forget_batch(deps: Deps, meta: CallMeta, command: ForgetBatch) -> dict[str, Any]:
    user_id, idempotency_key = meta.user_id, meta.idempotency_key
    dry_run = command.dry_run

    async def work(conn: psycopg.AsyncConnection) -> dict[str, Any]:
        valid = [i for i in command.ids if isinstance(i, int)]
        rows = await store.get_memories_for_update(conn, user_id, valid)
        results: list[dict[str, Any]] = []
        deleted_now: set[int] = set()
        for index, mid in enumerate(command.ids):
            if isinstance(mid, MemoryServiceError):
                results.append(failed_item(mid, input_index=index, id=command.sent[index]))
                continue
            row = rows.get(mid)
            if row is None or row.keep:
                error = not_found(mid) if row is None else locked_error(mid, "forgotten")
                results.append(failed_item(error, input_index=index, id=mid))
                continue
            already = row.deleted_at is not None or mid in deleted_now
            if not dry_run:
                await store.soft_delete(
                    conn,
                    user_id,
                    [mid],
                    reason=command.reason,
                    replaced_by_id=None,
                    keep_existing_metadata=already,
                )
                deleted_now.add(mid)
            message = _forget_message(dry_run=dry_run, already=already)
            results.append(_item_result(index, mid, already_deleted=already, message=message))
        oks = [r for r in results if r["ok"]]
        already_n = sum(1 for r in oks if r["already_deleted"])
        return _batch_payload(
            dry_run,
            results,
            deleted=len(oks) - already_n,
            already_deleted=already_n,
            errors=len(results) - len(oks),
        )

    return await run_write(
        deps, user_id, command.type_name(), None if dry_run else idempotency_key, work
    )
