"""OAuth protocol errors, as they go on the wire (RFC 6749 §4.1.2.1, §5.2; RFC 7591 §3.2.2).

::

    AuthError                 (auth.errors)
     └── OAuthError           an OAuth endpoint refuses a request: error code + description
          └── AuthorizePageError   /oauth/authorize cannot trust the redirect URI:
                                   shown to the user, never redirected (RFC 6749 §4.1.2.1)

``api/errors.py`` turns :class:`OAuthError` into an RFC 6749 §5.2 JSON body;
``api/oauth.py`` turns errors of a trusted authorization request into a
redirect to the client and :class:`AuthorizePageError` into an HTML page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from auth.errors import AuthError

OAuthErrorCode = Literal[
    # RFC 6749 §5.2 (token endpoint) and §4.1.2.1 (authorization endpoint)
    "invalid_request",
    "invalid_client",
    "invalid_grant",
    "unauthorized_client",
    "unsupported_grant_type",
    "unsupported_response_type",
    "invalid_scope",
    "access_denied",
    "server_error",
    "temporarily_unavailable",
    # RFC 8707 §2: a resource the server does not serve
    "invalid_target",
    # RFC 7591 §3.2.2 (registration endpoint)
    "invalid_redirect_uri",
    "invalid_client_metadata",
    # RFC 7009 §2.2.1 (revocation endpoint)
    "unsupported_token_type",
]


_E = TypeVar("_E", bound=type[BaseException])
#: What Python itself sets on an exception in flight (contextlib assigns
#: ``__traceback__`` with a plain attribute assignment, for one).
_EXCEPTION_STATE = frozenset(
    {"__traceback__", "__context__", "__cause__", "__suppress_context__", "__notes__"}
)


def _raisable(cls: _E) -> _E:
    """Let a frozen dataclass exception take the interpreter's bookkeeping.

    A frozen dataclass refuses every attribute assignment, including the
    ``exc.__traceback__ = tb`` that ``contextlib`` performs when an
    exception leaves an ``async with`` block. The fields stay frozen.
    """
    frozen_setattr = cls.__setattr__

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if name in _EXCEPTION_STATE:
            BaseException.__setattr__(self, name, value)
        else:
            frozen_setattr(self, name, value)

    cls.__setattr__ = __setattr__  # type: ignore[method-assign]
    return cls


@_raisable
@dataclass(frozen=True)
class OAuthError(AuthError):
    """A refusal in RFC 6749 form: ``error`` is the code, ``description`` says how to fix it.

    ``status`` is the HTTP status of a JSON answer: 400, or 401 for
    ``invalid_client`` (RFC 6749 §5.2). ``basic_auth`` records that the client
    tried HTTP Basic authentication, which makes a 401 carry
    ``WWW-Authenticate: Basic``.
    """

    error: OAuthErrorCode
    description: str
    status: int = 400
    basic_auth: bool = False

    def __str__(self) -> str:
        return f"{self.error}: {self.description}"


@_raisable
@dataclass(frozen=True)
class AuthorizePageError(OAuthError):
    """The client or redirect URI of an authorization request cannot be trusted.

    RFC 6749 §4.1.2.1: the server MUST NOT redirect the user-agent to an
    invalid redirect URI; it informs the resource owner instead.
    """


def invalid_client(description: str, *, basic_auth: bool = False) -> OAuthError:
    """RFC 6749 §5.2: client authentication failed (401)."""
    return OAuthError("invalid_client", description, 401, basic_auth)
