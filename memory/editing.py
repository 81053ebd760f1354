"""``update_memory(_batch)``, ``confirm``, ``forget(_batch)``: changes to stored rows.

Locked rows (``keep``) refuse every change but unlocking (SUPPLEMENT §3);
soft-deleted rows answer NOT_FOUND to updates (the chapter: forget and re-add).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import psycopg

from memory.rules import ranking
from memory.rules.inputs import Args, memory_id, reject_unknown
from memory.rules.text import check_secret, clean_text, normalize_tags, normalize_text
from memory.rules.timestamps import format_timestamp, parse_timestamp
from storage import memories as store

from .deps import Deps
from .errors import INVALID_INPUT, MemoryServiceError, invalid, not_found
from .relations import text_stored
from .writes import run_write

#: The fields update_memory can change, in the order changed_fields lists them.
UPDATE_FIELDS = ("text", "tags", "importance", "expires_at", "last_confirmed_at", "keep")
#: Every field of an update_memory_batch item (the tool's item schema lists the same).
UPDATE_ITEM_FIELDS = frozenset({"id", *UPDATE_FIELDS})
#: Every argument of update_memory: an item plus dry_run.
UPDATE_MEMORY_FIELDS = UPDATE_ITEM_FIELDS | {"dry_run"}
_REASON_CHARS = 1000


def locked_error(memory_id_: int, action: str) -> MemoryServiceError:
    return MemoryServiceError(
        INVALID_INPUT,
        f"Memory {memory_id_} is kept (locked) and cannot be {action}. "
        "Unlock it first with update_memory and keep: false.",
        {"reason": "locked", "id": memory_id_},
    )


# --- update ------------------------------------------------------------------


@dataclass(frozen=True)
class UpdateRequest:
    id: int
    changes: dict[str, Any]  # field -> new value (text carries its normalized form separately)
    normalized_text: str | None


def parse_update(
    raw: object, *, max_chars: int, known: frozenset[str] = UPDATE_ITEM_FIELDS
) -> UpdateRequest:
    """Validate one update_memory call or update_memory_batch item (``known`` its fields)."""
    args = Args(raw)
    reject_unknown(raw, known)
    mid = memory_id(args)
    changes: dict[str, Any] = {}
    normalized = None
    if args.present("text"):
        text = clean_text(args.raw("text"), field="text", max_chars=max_chars)
        check_secret(text)
        changes["text"] = text
        normalized = normalize_text(text)
    if args.has("tags"):  # null means "leave unchanged"; [] clears the tags
        changes["tags"] = normalize_tags(args.raw("tags"), refuse_secrets=True)
    if args.present("importance"):
        if args.raw("importance") is None:
            raise invalid("importance must be a number between 0 and 1.", field="importance")
        changes["importance"] = args.number("importance", default=None, minimum=0.0, maximum=1.0)
    if args.present("expires_at"):
        # null clears the expiry; a past instant would hide the row: forget is for that.
        value = args.raw("expires_at")
        expires = None if value is None else parse_timestamp(value, field="expires_at")
        if expires is not None and expires <= datetime.now(UTC):
            raise invalid(
                "expires_at is in the past; use forget to retire a memory.", field="expires_at"
            )
        changes["expires_at"] = expires
    if args.present("last_confirmed_at"):
        value = args.raw("last_confirmed_at")
        if value is None:
            raise invalid(
                "last_confirmed_at must be a date-time; use confirm to refresh it.",
                field="last_confirmed_at",
            )
        changes["last_confirmed_at"] = parse_timestamp(value, field="last_confirmed_at")
    if args.has("keep"):  # null is "not given": only an explicit false unlocks
        changes["keep"] = args.boolean("keep")
    if not changes:
        raise invalid(
            "Nothing to update: supply at least one of text, tags, importance, expires_at, "
            "last_confirmed_at or keep.",
            id=mid,
        )
    return UpdateRequest(mid, changes, normalized)


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
    changed = [f for f in UPDATE_FIELDS if f in request.changes]
    if dry_run:
        return changed
    columns = dict(request.changes)
    if "text" in columns:
        columns["normalized_text"] = request.normalized_text
        columns["embedding"] = embedding
        columns["embedding_provider"] = deps.embedder.provider
        columns["embedding_model"] = deps.embedder.model
    await store.update_fields(conn, user_id, row.id, columns)
    return changed


async def update_memory(
    deps: Deps, user_id: int, raw: dict[str, Any], *, idempotency_key: str | None = None
) -> dict[str, Any]:
    request = parse_update(raw, max_chars=deps.settings.max_text_chars, known=UPDATE_MEMORY_FIELDS)
    dry_run = Args(raw).boolean("dry_run")
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
        deps, user_id, "update_memory", None if dry_run else idempotency_key, work
    )
    if "text" in request.changes and not dry_run:
        # Committed: re-extract its relations (unless the text was the same: nothing owed).
        await text_stored(deps, user_id, [request.id], owed_only=True)
    return payload


async def update_memory_batch(
    deps: Deps, user_id: int, raw: dict[str, Any], *, idempotency_key: str | None = None
) -> dict[str, Any]:
    args = Args(raw)
    items = _batch_list(args, "items", deps.settings.max_batch_size, over_code=INVALID_INPUT)
    dry_run = args.boolean("dry_run")
    parsed: list[UpdateRequest | MemoryServiceError] = []
    for item in items:
        try:
            parsed.append(parse_update(item, max_chars=deps.settings.max_text_chars))
        except MemoryServiceError as ex:
            parsed.append(ex)
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
            item_id = _item_id(items[index])
            if isinstance(request, MemoryServiceError):
                results.append({"input_index": index, "id": item_id, **request.to_payload()})
                continue
            try:
                async with conn.transaction():  # a savepoint: one item's failure spares the rest
                    changed = await _update_one(
                        conn, deps, user_id, request, embeddings.get(index), dry_run=dry_run
                    )
                results.append(
                    {
                        "input_index": index,
                        "id": request.id,
                        "ok": True,
                        "changed_fields": changed,
                        "message": "Would update" if dry_run else "Ok",
                    }
                )
            except MemoryServiceError as ex:
                results.append({"input_index": index, "id": request.id, **ex.to_payload()})
        updated = sum(1 for r in results if r["ok"])
        return {
            "ok": True,
            "dry_run": dry_run,
            "results": results,
            "summary": {
                "total": len(results),
                "updated": updated,
                "errors": len(results) - updated,
            },
        }

    payload = await run_write(
        deps, user_id, "update_memory_batch", None if dry_run else idempotency_key, work
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


async def confirm(
    deps: Deps, user_id: int, raw: dict[str, Any], *, idempotency_key: str | None = None
) -> dict[str, Any]:
    mid = memory_id(Args(raw))

    async def work(conn: psycopg.AsyncConnection) -> dict[str, Any]:
        row = (await store.get_memories_for_update(conn, user_id, [mid])).get(mid)
        if row is None or row.deleted_at is not None:
            raise not_found(mid)
        # confirm is positive feedback (SUPPLEMENT §4); the keep lock does not apply.
        salience = ranking.next_salience(row.salience, ranking.CONFIRM_DELTA)
        confirmed_at = await store.confirm(conn, user_id, mid, salience)
        return {"ok": True, "memory_id": mid, "last_confirmed_at": format_timestamp(confirmed_at)}

    return await run_write(deps, user_id, "confirm", idempotency_key, work)


# --- forget ------------------------------------------------------------------


async def forget(
    deps: Deps, user_id: int, raw: dict[str, Any], *, idempotency_key: str | None = None
) -> dict[str, Any]:
    args = Args(raw)
    mid = memory_id(args)
    hard = args.boolean("hard_delete")
    reason = args.string("reason", max_len=_REASON_CHARS)
    replaced_by = args.integer("replaced_by_id", minimum=1)
    dry_run = args.boolean("dry_run")
    if hard and (reason is not None or replaced_by is not None):
        raise invalid(
            "reason and replaced_by_id cannot be used with hard_delete: a hard delete leaves "
            "no row to record them on.",
            field="reason" if reason is not None else "replaced_by_id",
        )
    if replaced_by == mid:
        raise invalid("A memory cannot be replaced by itself.", field="replaced_by_id")

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
        if dry_run:
            message = (
                "Would hard-delete"
                if hard
                else "Would update tombstone (already soft-deleted)"
                if already
                else "Would soft-delete"
            )
        elif hard:
            await store.hard_delete(conn, user_id, mid)
            message = "Forgotten permanently"
        else:
            await store.soft_delete(
                conn,
                user_id,
                [mid],
                reason=reason,
                replaced_by_id=replaced_by,
                keep_existing_metadata=already,
            )
            message = "Tombstone updated" if already else "Forgotten"
        return {
            "ok": True,
            "memory_id": mid,
            "dry_run": dry_run,
            "already_deleted": already,
            "hard_deleted": hard,
            "message": message,
        }

    return await run_write(deps, user_id, "forget", None if dry_run else idempotency_key, work)


async def forget_batch(
    deps: Deps, user_id: int, raw: dict[str, Any], *, idempotency_key: str | None = None
) -> dict[str, Any]:
    args = Args(raw)
    if args.raw("ids") is None:
        raise invalid("The ids field is required: an array of memory ids.", field="ids")
    raw_ids = args.raw("ids")
    if not isinstance(raw_ids, list):
        raise invalid("ids must be an array of integer ids.", field="ids")
    if not raw_ids:
        raise invalid("ids must not be empty.", field="ids")
    if len(raw_ids) > deps.settings.max_batch_size:
        raise MemoryServiceError(
            "LIMIT_EXCEEDED",
            f"ids has {len(raw_ids)} items; at most {deps.settings.max_batch_size} per call.",
            {"field": "ids", "limit": deps.settings.max_batch_size},
        )
    reason = args.string("reason", max_len=_REASON_CHARS)
    dry_run = args.boolean("dry_run")
    ids: list[int | MemoryServiceError] = []
    for value in raw_ids:
        try:
            ids.append(memory_id(Args({"id": value})))
        except MemoryServiceError as ex:
            ids.append(invalid(f"Item is not a valid memory id: {ex.message}", field="ids"))

    async def work(conn: psycopg.AsyncConnection) -> dict[str, Any]:
        valid = [i for i in ids if isinstance(i, int)]
        rows = await store.get_memories_for_update(conn, user_id, valid)
        results: list[dict[str, Any]] = []
        deleted_now: set[int] = set()
        for index, mid in enumerate(ids):
            if isinstance(mid, MemoryServiceError):
                results.append({"input_index": index, "id": raw_ids[index], **mid.to_payload()})
                continue
            row = rows.get(mid)
            if row is None:
                results.append({"input_index": index, "id": mid, **not_found(mid).to_payload()})
                continue
            if row.keep:
                results.append(
                    {"input_index": index, "id": mid, **locked_error(mid, "forgotten").to_payload()}
                )
                continue
            already = row.deleted_at is not None or mid in deleted_now
            if not dry_run:
                await store.soft_delete(
                    conn,
                    user_id,
                    [mid],
                    reason=reason,
                    replaced_by_id=None,
                    keep_existing_metadata=already,
                )
                deleted_now.add(mid)
            message = (
                (
                    "Would update tombstone (already soft-deleted)"
                    if already
                    else "Would soft-delete"
                )
                if dry_run
                else ("Tombstone updated" if already else "Forgotten")
            )
            results.append(
                {
                    "input_index": index,
                    "id": mid,
                    "ok": True,
                    "already_deleted": already,
                    "message": message,
                }
            )
        oks = [r for r in results if r["ok"]]
        already_n = sum(1 for r in oks if r["already_deleted"])
        return {
            "ok": True,
            "dry_run": dry_run,
            "results": results,
            "summary": {
                "total": len(results),
                "deleted": len(oks) - already_n,
                "already_deleted": already_n,
                "errors": len(results) - len(oks),
            },
        }

    return await run_write(
        deps, user_id, "forget_batch", None if dry_run else idempotency_key, work
    )


# --- shared --------------------------------------------------------------------


def _batch_list(args: Args, name: str, limit: int, *, over_code: str) -> list[Any]:
    value = args.raw(name)
    if value is None:
        raise invalid(f"The {name} field is required: an array.", field=name)
    if not isinstance(value, list):
        raise invalid(f"{name} must be an array.", field=name)
    if not value:
        raise invalid(f"{name} must not be empty.", field=name)
    if len(value) > limit:
        raise MemoryServiceError(
            over_code,
            f"{name} has {len(value)} items; at most {limit} per call.",
            {"field": name, "limit": limit},
        )
    return value


def _item_id(item: object) -> Any:
    if isinstance(item, dict):
        value = item.get("id")
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None
