"""The memory domain's one error type.

Every failure a tool can report is a :class:`MemoryServiceError` carrying one
of the codes of the tools chapter ("Error codes"). ``api/errors.py`` is the
only place that turns it into a wire payload.
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


def invalid(message: str, **detail: Any) -> MemoryServiceError:
    return MemoryServiceError(INVALID_INPUT, message, detail or None)


def not_found(memory_id: int) -> MemoryServiceError:
    # SUPPLEMENT §1: another user's id answers exactly like a missing one.
    return MemoryServiceError(NOT_FOUND, f"Memory {memory_id} not found.")
