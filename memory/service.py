"""The use cases, one function per tool, and the table the API and workers share.

Every use case has the signature
``async (deps, user_id, args, *, idempotency_key=None) -> payload`` and
either returns its ``{"ok": true, ...}`` payload or raises
:class:`MemoryServiceError`. Whether it runs inline or on a worker is decided
by the tool registry (``api/mcp/tools.py``), not here.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from memory.rules.inputs import Args

from . import editing, learning, reading, relations, scans
from .deps import Deps
from .errors import DATABASE_ERROR, INVALID_INPUT, MemoryServiceError, invalid
from .remembering import RememberItem, parse_item, store_items

UseCase = Callable[..., Awaitable[dict[str, Any]]]

_log = logging.getLogger(__name__)


async def remember(
    deps: Deps, user_id: int, raw: dict[str, Any], *, idempotency_key: str | None = None
) -> dict[str, Any]:
    settings = deps.settings
    item = parse_item(raw, max_chars=settings.max_text_chars, max_ids=settings.max_batch_size)

    def envelope(results: list[dict[str, Any]]) -> dict[str, Any]:
        return results[0]

    payload = await store_items(
        deps, user_id, [item], idempotency_key=idempotency_key, tool="remember", envelope=envelope
    )
    if not payload["ok"]:
        error = payload["error"]
        raise MemoryServiceError(error["code"], error["message"], error.get("detail"))
    return payload


async def remember_batch(
    deps: Deps, user_id: int, raw: dict[str, Any], *, idempotency_key: str | None = None
) -> dict[str, Any]:
    settings = deps.settings
    args = Args(raw)
    items = args.raw("items")
    if items is None:
        raise invalid("The items field is required: an array of memories.", field="items")
    if not isinstance(items, list):
        raise invalid("items must be an array.", field="items")
    if not items:
        raise invalid("items must not be empty.", field="items")
    if len(items) > settings.max_batch_size:
        raise MemoryServiceError(
            INVALID_INPUT,
            f"items has {len(items)} entries; at most {settings.max_batch_size} per call.",
            {"field": "items", "limit": settings.max_batch_size},
        )
    default_source = args.string("source_provider", max_len=200)
    default_policy = args.choice("dedup_policy", ("insert", "skip_if_near", "ask"), "ask") or "ask"
    parsed: list[RememberItem | MemoryServiceError] = []
    for raw_item in items:
        try:
            parsed.append(
                parse_item(
                    raw_item,
                    max_chars=settings.max_text_chars,
                    max_ids=settings.max_batch_size,
                    default_source=default_source,
                    default_policy=default_policy,
                )
            )
        except MemoryServiceError as ex:
            parsed.append(ex)

    def envelope(results: list[dict[str, Any]]) -> dict[str, Any]:
        succeeded = sum(1 for r in results if r["ok"])
        return {
            "ok": True,
            "results": results,
            "summary": {
                "total": len(results),
                "succeeded": succeeded,
                "failed": len(results) - succeeded,
            },
        }

    return await store_items(
        deps,
        user_id,
        parsed,
        idempotency_key=idempotency_key,
        tool="remember_batch",
        envelope=envelope,
    )


def _guarded(use_case: UseCase) -> UseCase:
    """Turn database failures into DATABASE_ERROR; the transaction has rolled back."""

    @functools.wraps(use_case)
    async def run(deps: Deps, user_id: int, raw: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return await use_case(deps, user_id, raw, **kwargs)
        except MemoryServiceError:
            raise
        except psycopg.Error as ex:
            _log.error("database error in %s: %s", use_case.__name__, type(ex).__name__)
            raise MemoryServiceError(
                DATABASE_ERROR,
                "The database failed to complete the request; nothing was changed. Try again.",
                {"sqlstate": getattr(ex, "sqlstate", None)},
            ) from ex

    return run


USE_CASES: dict[str, UseCase] = {
    name: _guarded(fn)
    for name, fn in {
        "remember": remember,
        "remember_batch": remember_batch,
        "recall": reading.recall,
        "search_memory": reading.recall,
        "build_context_prompt": reading.build_context_prompt,
        "list_memories": reading.list_memories,
        "update_memory": editing.update_memory,
        "update_memory_batch": editing.update_memory_batch,
        "confirm": editing.confirm,
        "forget": editing.forget,
        "forget_batch": editing.forget_batch,
        "text_search": reading.text_search,
        "get_memory": reading.get_memory,
        "count_memories": reading.count_memories,
        "memory_stats": reading.memory_stats,
        "list_tags": reading.list_tags,
        "export_memories": reading.export_memories,
        "reinforce": learning.reinforce,
        "find_near_duplicates": scans.find_near_duplicates,
        "find_conflicts": scans.find_conflicts,
        "query_relations": relations.query_relations,
    }.items()
}
