"""Errors of the ``auth`` package.

::

    AuthError
     ├── BearerError    a request to the protected resource is refused (RFC 6750)
     └── AccountError   an account cannot be created or changed as asked

``api/errors.py`` is the only place that turns them into HTTP responses.
"""

from __future__ import annotations

from typing import Literal

BearerErrorCode = Literal["invalid_request", "invalid_token", "insufficient_scope"]
AccountProblem = Literal[
    "duplicate_username", "invalid_username", "invalid_password", "unknown_user", "account_disabled"
]


class AuthError(Exception):
    """Root of every error raised by ``auth``."""


class BearerError(AuthError):
    """The resource server refuses a request (RFC 6750 §3).

    ``error`` is None when the request carried no token at all: the answer
    is then a bare challenge without an error code (RFC 6750 §3.1).
    ``scope`` names the scopes needed, for ``insufficient_scope``.
    """

    def __init__(
        self,
        status: int,
        error: BearerErrorCode | None,
        description: str,
        *,
        scope: str | None = None,
    ) -> None:
        super().__init__(description)
        self.status = status
        self.error = error
        self.description = description
        self.scope = scope

    def __repr__(self) -> str:
        return f"BearerError({self.status}, {self.error!r}, {self.description!r})"


class AccountError(AuthError):
    """An account request is refused; ``problem`` says why, the message says how to fix it."""

    def __init__(self, problem: AccountProblem, message: str) -> None:
        super().__init__(message)
        self.problem = problem
        self.message = message
