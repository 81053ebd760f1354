"""The use cases, one function per tool, and the table the API and workers share.

Every entry of :data:`USE_CASES` has the signature
``async (deps, user_id, args, *, idempotency_key=None) -> payload`` and
either returns its ``{"ok": true, ...}`` payload or raises
:class:`MemoryServiceError`. For a tool with a command (``memory.commands``:
the writes and the scans) ``args`` is that command, as the worker gets it
from the queue; its JSON or the raw tool arguments are accepted too and
parsed first (operator scripts, tests). The reads take the raw arguments.
Whether a use case runs inline or on a worker is decided by the tool
registry (``api/mcp/tools.py``), not here.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from . import editing, learning, reading, relations, scans
from .commands import COMMANDS, as_command
from .deps import Deps
from .errors import DATABASE_ERROR, MemoryServiceError
from .remembering import remember, remember_batch

UseCase = Callable[..., Awaitable[dict[str, Any]]]

_log = logging.getLogger(__name__)


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


def _commanded(tool: str, use_case: UseCase) -> UseCase:
    """``use_case`` taking ``tool``'s command, whatever form of it the caller holds."""

    @functools.wraps(use_case)
    async def run(deps: Deps, user_id: int, args: Any, **kwargs: Any) -> dict[str, Any]:
        return await use_case(deps, user_id, as_command(tool, args, deps.settings), **kwargs)

    return run


_TABLE: dict[str, UseCase] = {
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
}

USE_CASES: dict[str, UseCase] = {
    name: _guarded(_commanded(name, fn) if name in COMMANDS else fn) for name, fn in _TABLE.items()
}
