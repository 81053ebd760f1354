"""Bearer-token checks for the protected resource (RFC 6750; SUPPLEMENT §8).

``api`` calls :meth:`BearerValidator.validate` with the raw ``Authorization``
header and, on :class:`~auth.errors.BearerError`, answers ``error.status``
with ``WWW-Authenticate: www_authenticate(settings, error)``.

A token that verifies is then checked against its account in one indexed
statement per request (:func:`storage.tokens.token_standing`): the user must
exist and be enabled, the ``jti`` must not be in the revocation list
(``oauth_revoked_tokens``), and ``iat`` must not precede the account's
``tokens_valid_after`` (set by a password change or ``ownsona token revoke
--all``). So a revocation, a disabled or deleted account takes effect at once
in every process. Once a minute per token and process, the same statement
also refreshes the token's "last used" (when over a minute old); otherwise it
is a plain read, so the hot path costs no write per request. :meth:`BearerValidator.require_scope` gives the
403 ``insufficient_scope`` refusal (RFC 6750 §3.1).
"""

from __future__ import annotations

import re
import time

from auth.errors import BearerError
from auth.keys import KeyStore
from auth.loopback import resource_for_host
from auth.scopes import DEFAULT_SCOPE
from auth.tokens import Principal, verify_access_token
from config.settings import Settings
from storage import tokens

__all__ = ["BearerValidator", "Principal", "resource_metadata_url", "www_authenticate"]

#: RFC 6750 §2.1: ``credentials = "Bearer" 1*SP b64token``.
_CREDENTIALS = re.compile(r"([A-Za-z0-9!#$%&'*+.^_`|~-]+)[ \t]+([A-Za-z0-9._~+/-]+=*)")
#: Tokens whose last touch a validator remembers before starting over.
_MAX_TOUCHED = 10_000
# What RFC 6750 §3 allows inside error, error_description and scope values.
_UNSAFE = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e]")


class BearerValidator:
    """Turns an ``Authorization`` header into a :class:`Principal` or a :class:`BearerError`."""

    def __init__(self, keystore: KeyStore, settings: Settings) -> None:
        self._keystore = keystore
        self._settings = settings
        # jti -> when this process last asked to refresh its "last used": the
        # plain read is cheaper than the read with the UPDATE beside it.
        self._touched: dict[str, float] = {}

    async def validate(self, authorization: str | None) -> Principal:
        if authorization is None or not authorization.strip():
            # No credentials at all: a bare challenge, no error code (RFC 6750 §3.1).
            raise BearerError(401, None, "Authorization required")
        match = _CREDENTIALS.fullmatch(authorization.strip())
        if match is None or match.group(1).lower() != "bearer":
            raise BearerError(401, "invalid_token", "expected 'Authorization: Bearer <token>'")
        principal = await verify_access_token(self._keystore, self._settings, match.group(2))
        touch = self._due_for_touch(principal.jti)
        async with self._keystore.pool.connection() as conn:
            standing = await tokens.token_standing(
                conn,
                jti=principal.jti,
                user_id=principal.user_id,
                client_id=principal.client_id,
                touch=touch,
            )
        refusal = _refusal(principal, standing)
        if refusal is not None:
            raise BearerError(401, "invalid_token", refusal)
        return principal

    def _due_for_touch(self, jti: str) -> bool:
        now = time.monotonic()
        last = self._touched.get(jti)
        if last is not None and now - last < tokens.LAST_USED_EVERY_S:
            return False
        if len(self._touched) >= _MAX_TOUCHED:
            self._touched.clear()  # forgetting only costs one extra touch per token
        self._touched[jti] = now
        return True

    @staticmethod
    def require_scope(principal: Principal, scope: str) -> None:
        """:class:`BearerError` 403 ``insufficient_scope`` unless the token carries ``scope``."""
        if scope not in principal.scopes:
            raise BearerError(
                403, "insufficient_scope", f"this call needs the {scope} scope", scope=scope
            )

    def challenge(self, error: BearerError) -> str:
        """The ``WWW-Authenticate`` value for ``error``."""
        return www_authenticate(self._settings, error)


def _refusal(principal: Principal, standing: tokens.TokenStanding | None) -> str | None:
    """Why a correctly signed token no longer speaks for anyone, or None."""
    if standing is None:
        return "unknown account"  # deleted, or never existed
    if standing.disabled:
        return "account disabled"
    if standing.revoked:
        return "token revoked"
    cut_off = standing.tokens_valid_after
    # iat has whole seconds: a token of the same second as the cut-off is refused too
    # (its holder gets a new one), never one issued before the cut-off accepted.
    if cut_off is not None and principal.issued_at < cut_off:
        return "token ended by the account's owner"
    return None


def resource_metadata_url(settings: Settings, host: str | None = None) -> str:
    """Where the protected-resource metadata lives (RFC 9728), on the loopback name in ``host``."""
    base = resource_for_host(settings.resource_url, host).removesuffix("/mcp")
    return f"{base}/.well-known/oauth-protected-resource"


def www_authenticate(settings: Settings, error: BearerError, host: str | None = None) -> str:
    """``Bearer resource_metadata="…"`` plus the error parameters when a token was sent.

    Every challenge names a scope: the one missing for ``insufficient_scope``,
    otherwise every scope we support, which is what a client should ask for
    (MCP Authorization, "Scope Selection Strategy").

    Error values are restricted to the characters RFC 6750 §3 allows (a
    ``"`` becomes ``'``, anything else outside the set becomes ``?``), so the
    header can neither break out of its quotes nor carry a line break.
    """
    params = [f"resource_metadata={_quoted(resource_metadata_url(settings, host))}"]
    if error.error is not None:
        params.append(f'error="{_safe(error.error)}"')
        if error.description:
            params.append(f'error_description="{_safe(error.description)}"')
    params.append(f'scope="{_safe(error.scope or DEFAULT_SCOPE)}"')
    return "Bearer " + ", ".join(params)


def _safe(value: str) -> str:
    return _UNSAFE.sub("?", value.replace('"', "'"))


def _quoted(value: str) -> str:
    """An HTTP quoted-string (RFC 9110 §5.6.4), control characters dropped."""
    cleaned = "".join(ch for ch in value if ch == "\t" or (ch >= " " and ch != "\x7f"))
    return '"' + cleaned.replace("\\", "\\\\").replace('"', '\\"') + '"'
