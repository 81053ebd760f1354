"""The one place in the API process where errors become wire shapes (STYLE §3.1).

A queued tool's domain error became its payload once, on the worker
(``tasks/actors.run_command``); that payload is passed on as it is, so
what arrives here from a tool is an exception raised in this process: by an
inline tool, by a call refused before it was queued, or by the queue itself.

- :class:`~memory.errors.MemoryServiceError` → a tool payload
  ``{"ok": false, "error": {...}}``, sent as a tool result with ``isError``
  (MCP, Tools, "Error Handling": tool failures are results, not protocol
  errors, so the model can see and act on them).
- A database failure (``psycopg.Error``, the pool's timeout included) a
  tool raises, or one that stops the bearer check of a ``tools/call`` →
  a DATABASE_ERROR tool payload ("nothing was changed, try again"): an
  outage is a tool error the model can act on, not a protocol error.
- Anything else a tool raises → an INTERNAL_ERROR tool payload with a
  generic message; the traceback is logged here, the arguments never are
  (they hold memory text).
- :class:`~api.mcp.jsonrpc.JsonRpcError` → a JSON-RPC error response.
- :class:`~auth.errors.BearerError` → 401/403 with ``WWW-Authenticate``
  (RFC 6750 §3, RFC 9728 §5.1) and an OAuth-style JSON body.
- :class:`~auth.oauth_errors.OAuthError` from ``/oauth/*`` → the RFC 6749
  §5.2 JSON body ``{"error", "error_description"}``, 400 (401 for
  ``invalid_client``, with ``WWW-Authenticate: Basic`` when the client tried
  Basic), never cached. Authorization-endpoint errors are redirects or
  pages instead; ``api/oauth.py`` builds those from the same exception.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import psycopg

from api.mcp import jsonrpc
from auth.bearer import www_authenticate
from auth.errors import BearerError
from auth.oauth_errors import OAuthError
from config.settings import Settings
from memory.errors import (
    AUTH_FAILED,
    AUTH_REQUIRED,
    DATABASE_ERROR,
    INTERNAL_ERROR,
    MemoryServiceError,
)

logger = logging.getLogger("ownsona.api")

#: The message of every unexpected tool failure; details stay in the server log.
INTERNAL_MESSAGE = (
    "An unexpected error occurred on the server; it has been logged. Try again later."
)
#: A queued write that did not answer in time may still be applied by its worker.
TIMEOUT_MESSAGE = (
    "The operation did not finish in time and may still complete. Check (for example with "
    "get_memory, recall or list_memories) before repeating it."
)
#: The message of a tool call the database could not serve (the same as memory.handlers').
DATABASE_MESSAGE = "The database failed to complete the request; nothing was changed. Try again."
#: A tool argument holding a lone surrogate (JSON's "\\ud800"), which is not text.
SURROGATE_MESSAGE = (
    "Arguments contain a lone UTF-16 surrogate (such as \\ud800), which is not valid "
    "Unicode text; nothing was done."
)


@dataclass
class HttpReply:
    """A complete HTTP answer: status, headers and a JSON body (or none)."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


def tool_failure_payload(ex: Exception, *, tool: str, user_id: int) -> dict[str, Any]:
    """The tool payload for an exception a tool raised."""
    if isinstance(ex, MemoryServiceError):
        return ex.to_payload()
    if is_database_failure(ex):
        # The type only: a driver message may quote the statement's parameters.
        logger.error("tool %s for user %s: database failure %s", tool, user_id, type(ex).__name__)
        return database_payload()
    if isinstance(ex, TimeoutError):  # asyncio.TimeoutError is TimeoutError since 3.11
        logger.warning("tool %s timed out for user %s", tool, user_id)
        return MemoryServiceError(INTERNAL_ERROR, TIMEOUT_MESSAGE).to_payload()
    # Only the tool name and user id: arguments carry memory text and must not be logged.
    logger.error("tool %s failed for user %s", tool, user_id, exc_info=ex)
    return internal_payload()


def is_database_failure(ex: BaseException) -> bool:
    """Whether ``ex`` is PostgreSQL (or the pool in front of it) failing, not our code."""
    return isinstance(ex, psycopg.Error)


def database_payload() -> dict[str, Any]:
    """The DATABASE_ERROR tool payload for a call the database could not serve."""
    return MemoryServiceError(DATABASE_ERROR, DATABASE_MESSAGE).to_payload()


def internal_payload() -> dict[str, Any]:
    """The generic INTERNAL_ERROR tool payload (tools chapter, "Error codes")."""
    return MemoryServiceError(INTERNAL_ERROR, INTERNAL_MESSAGE).to_payload()


def jsonrpc_error_reply(
    status: int,
    err: jsonrpc.JsonRpcError,
    request_id: jsonrpc.RequestId | None = None,
    headers: dict[str, str] | None = None,
) -> HttpReply:
    """A JSON-RPC error response carried with an HTTP status."""
    return HttpReply(status, jsonrpc.error(request_id, err), dict(headers or {}))


def internal_jsonrpc_error(ex: BaseException) -> jsonrpc.JsonRpcError:
    """The protocol-level fallback for a failure outside any tool; logs it."""
    logger.error("unexpected failure while handling an MCP message", exc_info=ex)
    return jsonrpc.JsonRpcError(jsonrpc.INTERNAL_ERROR, "Internal error")


def bearer_reply(settings: Settings, ex: BearerError, host: str | None = None) -> HttpReply:
    """401 (or the error's status) with the RFC 6750 challenge.

    The body follows RFC 6750's error vocabulary, plus the tools chapter's
    code: AUTH_REQUIRED when no credentials were sent, AUTH_FAILED otherwise.
    """
    body = {
        # RFC 6750 §3.1 gives no error code for a missing token; "unauthorized" fills the slot.
        "error": ex.error or "unauthorized",
        "error_description": ex.description,
        "code": AUTH_REQUIRED if ex.error is None else AUTH_FAILED,
    }
    return HttpReply(ex.status, body, {"WWW-Authenticate": www_authenticate(settings, ex, host)})


#: RFC 6749 §5.1: token endpoint answers must not be cached.
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


def oauth_reply(ex: OAuthError) -> HttpReply:
    """The RFC 6749 §5.2 error response for an OAuth endpoint."""
    headers = dict(NO_STORE)
    if ex.status == 401 and ex.basic_auth:
        # RFC 6749 §5.2: a failed HTTP Basic attempt is answered with the Basic challenge.
        headers["WWW-Authenticate"] = 'Basic realm="OwnSona", charset="UTF-8"'
    body = {"error": ex.error, "error_description": ex.description}
    return HttpReply(ex.status, body, headers)
