"""The memory domain's one error type.

Every failure a tool can report is a :class:`MemoryServiceError` carrying one
of the codes of the tools chapter ("Error codes"). Use cases raise it; it
becomes a ``{"ok": false, "error": {...}}`` payload once, at the boundary it
crosses:

- on a worker, where ``tasks/actors.run_command`` returns it as the
  message's result (the API passes that payload on untouched);
- in the API process, in ``api/errors.py`` (a tool that ran inline, or a
  call refused before it was queued).

One more place builds error entries, and they are not failures of the call:
the per-item outcomes inside a batch's *success* payload (``remember_batch``'s
``results[i]``, ``update_memory_batch``'s and ``forget_batch``'s ``results``
with ``ok: false``). They are part of that success shape and are all built
by :func:`failed_item`.
"""

from __future__ import annotations

from typing import Any

INVALID_INPUT = "INVALID_INPUT"
AUTH_REQUIRED = "AUTH_REQUIRED"
AUTH_FAILED = "AUTH_FAILED"
NOT_FOUND = "NOT_FOUND"
SECRET_REJECTED = "SECRET_REJECTED"
LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
EMBEDDING_ERROR = "EMBEDDING_ERROR"
DATABASE_ERROR = "DATABASE_ERROR"
INTERNAL_ERROR = "INTERNAL_ERROR"

CODES = frozenset(
    {
        INVALID_INPUT,
        AUTH_REQUIRED,
        AUTH_FAILED,
        NOT_FOUND,
        SECRET_REJECTED,
        LIMIT_EXCEEDED,
        EMBEDDING_ERROR,
        DATABASE_ERROR,
        INTERNAL_ERROR,
    }
)


class MemoryServiceError(Exception):
    """A failure with a spec error code, a message a model can act on, and detail."""

    def __init__(self, code: str, message: str, detail: dict[str, Any] | None = None) -> None:
        if code not in CODES:
            raise ValueError(f"unknown error code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.detail = detail

    def to_payload(self) -> dict[str, Any]:
        """The ``{"ok": false, "error": {...}}`` payload of the tools chapter."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.detail:
            error["detail"] = self.detail
        return {"ok": False, "error": error}


def failed_item(error: MemoryServiceError, **position: Any) -> dict[str, Any]:
    """One failed item of a batch's success payload: ``{**position, "ok": false, "error"}``.

    ``position`` is what locates the item in its batch (``input_index``,
    ``id``), listed first as the batch tools' results show it.
    """
    return {**position, **error.to_payload()}


def invalid(message: str, **detail: Any) -> MemoryServiceError:
    return MemoryServiceError(INVALID_INPUT, message, detail or None)


def not_found(memory_id: int) -> MemoryServiceError:
    # SUPPLEMENT §1: another user's id answers exactly like a missing one.
    return MemoryServiceError(NOT_FOUND, f"Memory {memory_id} not found.")
