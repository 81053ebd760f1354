"""Codes, the token endpoint's grants, and revocation (OAuth 2.1 §4.1, §4.3; RFC 7009).

- Authorization codes: 256-bit, single use, :data:`CODE_TTL_S` seconds,
  bound to the client, the redirect URI, the PKCE challenge, the scope and
  the resource. The first redemption attempt burns the code whatever its
  outcome; a second one is a replay and revokes everything the first
  issued (OAuth 2.1 §4.1.3: "SHOULD revoke all tokens issued on that code").
- Every successful code exchange starts a *grant* (a refresh-token family).
  Each refresh rotates the refresh token; presenting a rotated-out token
  revokes the grant, the newest refresh token included, and deny-lists the
  access tokens it issued (OAuth 2.1 §4.3.1, stolen-token detection).
- The grace window (``OAUTH_REFRESH_GRACE_SECONDS``, 0 turns it off): a
  client that refreshes in parallel, or retries a refresh whose answer it
  lost, presents the same token twice. Presented again by its own client
  within the window, a rotated-out token gets a new access token and the
  family's *live* refresh token, the very one the first request received
  (kept sealed under the rotated-out token, :mod:`auth.refresh_seal`), not
  a sibling: the family keeps exactly one live refresh token, so a race
  never forks it into several long-lived ones. After the window, reuse
  revokes the family as before. The token row and its grant are locked
  (``FOR UPDATE``), so requests with one family's tokens run one at a time.
- Errors are decided inside the transaction but raised after it commits,
  so a burnt code or a revoked family stays burnt and revoked.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from auth.authorize import AuthorizationRequest
from auth.errors import BearerError
from auth.keys import KeyStore
from auth.loopback import same_resource
from auth.oauth_errors import OAuthError
from auth.opaque import digest, new_secret, presentable
from auth.pkce import verifier_matches
from auth.refresh_seal import seal, unseal
from auth.scopes import canonical, parse_scope
from auth.tokens import (
    LEEWAY_S,
    MAX_TOKEN_CHARS,
    IssuedToken,
    mint_access_token,
    verify_access_token,
)
from config.settings import Settings
from storage import oauth, tokens
from storage.oauth import ClientRow, RefreshTokenRow
from storage.tokens import CLI_CLIENT_ID

logger = logging.getLogger("ownsona.auth")

#: Lifetime of an authorization code, in seconds (SUPPLEMENT §8).
CODE_TTL_S = 60
# Sign-in failures older than this are surely outside any throttle window.
_KEEP_FAILURES_S = 24 * 3600
# Rotations a replay within the grace window may follow to the live token.
_MAX_GRACE_HOPS = 8


# -- token requests: a union discriminated on grant_type ----------------------


@dataclass(frozen=True)
class AuthorizationCodeRequest:
    """RFC 6749 §4.1.3 with RFC 7636 §4.5 (code_verifier) and RFC 8707 §2.2 (resource)."""

    grant_type: Literal["authorization_code"]
    code: str
    redirect_uri: str | None
    code_verifier: str | None
    resource: str | None


@dataclass(frozen=True)
class RefreshTokenRequest:
    """RFC 6749 §6 with RFC 8707 §2.2 (resource)."""

    grant_type: Literal["refresh_token"]
    refresh_token: str
    scope: str | None
    resource: str | None


TokenRequest = AuthorizationCodeRequest | RefreshTokenRequest


def parse_token_request(form: dict[str, str]) -> TokenRequest:
    """The typed request of a token endpoint form; :class:`OAuthError` when malformed."""
    grant_type = form.get("grant_type")
    if not grant_type:
        raise OAuthError("invalid_request", "grant_type is required.")
    if grant_type == "authorization_code":
        code = form.get("code")
        if not code:
            raise OAuthError("invalid_request", "code is required.")
        return AuthorizationCodeRequest(
            "authorization_code",
            code,
            form.get("redirect_uri"),
            form.get("code_verifier"),
            form.get("resource"),
        )
    if grant_type == "refresh_token":
        token = form.get("refresh_token")
        if not token:
            raise OAuthError("invalid_request", "refresh_token is required.")
        return RefreshTokenRequest("refresh_token", token, form.get("scope"), form.get("resource"))
    raise OAuthError(
        "unsupported_grant_type", "grant_type must be authorization_code or refresh_token."
    )


@dataclass(frozen=True)
class TokenResponse:
    """RFC 6749 §5.1."""

    access_token: str
    expires_in: int
    scope: str
    refresh_token: str | None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "access_token": self.access_token,
            "token_type": "Bearer",
            "expires_in": self.expires_in,
            "scope": self.scope,
        }
        if self.refresh_token is not None:
            body["refresh_token"] = self.refresh_token
        return body


@dataclass(frozen=True)
class _Holder:
    """Whom a grant's tokens are issued to: the grant, its client and its user."""

    grant_id: int
    client: ClientRow
    user_id: int


# -- the service ---------------------------------------------------------------


class Grants:
    """Issues codes and tokens, rotates and revokes them; shares the pool and key store."""

    def __init__(self, pool: AsyncConnectionPool, keystore: KeyStore, settings: Settings) -> None:
        self._pool = pool
        self._keystore = keystore
        self._settings = settings

    async def issue_code(
        self, conn: AsyncConnection, request: AuthorizationRequest, user_id: int
    ) -> str:
        """A new authorization code for ``request``, stored as a digest in the caller's transaction.

        Also sweeps what has expired (codes, revocations, sessions, old
        sign-in failures): cheap indexed deletes, at the pace codes are made.
        """
        await oauth.prune_expired(conn, login_window_s=_KEEP_FAILURES_S)
        code = new_secret()
        await oauth.insert_code(
            conn,
            code_hash=digest(code),
            client_id=request.client.client_id,
            user_id=user_id,
            redirect_uri=request.redirect_uri,
            code_challenge=request.code_challenge,
            scope=request.scope,
            resource=request.resource,
            expires_at=_now() + timedelta(seconds=CODE_TTL_S),
        )
        return code

    async def exchange(self, request: TokenRequest, client: ClientRow) -> TokenResponse:
        """Serve an authenticated client's token request; :class:`OAuthError` when refused."""
        # Follow a key rotation made by another process before signing.
        await self._keystore.refresh_if_stale()
        outcome: TokenResponse | OAuthError
        async with self._pool.connection() as conn, conn.transaction():
            if isinstance(request, AuthorizationCodeRequest):
                outcome = await self._redeem_code(conn, request, client)
            else:
                outcome = await self._refresh(conn, request, client)
        if isinstance(outcome, OAuthError):
            raise outcome
        return outcome

    async def _redeem_code(
        self, conn: AsyncConnection, request: AuthorizationCodeRequest, client: ClientRow
    ) -> TokenResponse | OAuthError:
        if not presentable(request.code):
            return _invalid_grant("Unknown authorization code.")
        code = await oauth.claim_code(conn, digest(request.code))
        if code is None:
            return _invalid_grant("Unknown authorization code.")
        if code.used_at is not None:
            # OAuth 2.1 §4.1.3: a code used twice revokes what it issued.
            if code.grant_id is not None:
                await end_grant(conn, code.grant_id, "code replayed")
            logger.warning("authorization code replayed (client %s)", client.client_id)
            return _invalid_grant("The authorization code was already used.")
        if code.expires_at <= _now():
            return _invalid_grant("The authorization code has expired.")
        if code.client_id != client.client_id:
            return _invalid_grant("The authorization code was issued to another client.")
        if request.redirect_uri != code.redirect_uri:
            return _invalid_grant("redirect_uri differs from the authorization request's.")
        if not verifier_matches(request.code_verifier, code.code_challenge):
            return _invalid_grant("code_verifier does not match the code_challenge (PKCE).")
        if request.resource is not None and not _same_resource(request.resource, code.resource):
            return OAuthError(
                "invalid_target", "resource differs from the authorization request's."
            )
        grant_id = await oauth.insert_grant(
            conn,
            client_id=client.client_id,
            user_id=code.user_id,
            scope=code.scope,
            resource=code.resource,
        )
        await oauth.set_code_grant(conn, code.code_hash, grant_id)
        return await self._issue(conn, _Holder(grant_id, client, code.user_id), code.scope)

    async def _refresh(
        self, conn: AsyncConnection, request: RefreshTokenRequest, client: ClientRow
    ) -> TokenResponse | OAuthError:
        if "refresh_token" not in client.grant_types:
            return OAuthError("unauthorized_client", "This client may not use refresh tokens.")
        if not presentable(request.refresh_token):
            return _invalid_grant("Unknown refresh token.")
        row = await oauth.lock_refresh_token(conn, digest(request.refresh_token))
        if row is None or row.client_id != client.client_id:
            return _invalid_grant("Unknown refresh token.")
        if row.grant_revoked_at is not None:
            return _invalid_grant("The refresh token has been revoked.")
        live, live_token = row, request.refresh_token
        if row.rotated_at is not None:
            successor = await self._within_grace(conn, request.refresh_token, row)
            if successor is None:
                # OAuth 2.1 §4.3.1: a rotated-out token came back; someone holds a copy.
                await end_grant(conn, row.grant_id, "refresh token reused")
                logger.warning(
                    "refresh token reused: grant %s of client %s revoked",
                    row.grant_id,
                    client.client_id,
                )
                return _invalid_grant("The refresh token was already used; the grant is revoked.")
            live, live_token = successor
            logger.info(
                "refresh token presented again within the grace window (grant %s, client %s)",
                row.grant_id,
                client.client_id,
            )
        if live.expires_at <= _now():
            return _invalid_grant("The refresh token has expired.")
        if live.user_disabled:
            return _invalid_grant("The account is disabled.")
        if request.resource is not None and not _same_resource(request.resource, live.resource):
            return OAuthError("invalid_target", "resource differs from the original grant's.")
        scope = live.scope
        if request.scope is not None:
            # RFC 6749 §6: the requested scope must not exceed the original grant.
            requested = parse_scope(request.scope)
            granted = set(live.scope.split())
            if not requested or not set(requested) <= granted:
                return OAuthError(
                    "invalid_scope", f"scope may only narrow the grant: {live.scope}."
                )
            scope = canonical(requested)
        if live is not row:
            holder = _Holder(live.grant_id, client, live.user_id)
            return await self._reissue(conn, holder, scope, live_token)
        refresh = new_secret()
        await oauth.mark_rotated(
            conn,
            row.token_hash,
            successor_hash=digest(refresh),
            successor_sealed=seal(request.refresh_token, row.token_hash, refresh),
        )
        return await self._issue(conn, _Holder(row.grant_id, client, row.user_id), scope, refresh)

    async def _within_grace(
        self, conn: AsyncConnection, presented: str, row: RefreshTokenRow
    ) -> tuple[RefreshTokenRow, str] | None:
        """The family's live refresh token (row, value) if ``row`` was rotated within the window.

        Follows the chain of sealed successors from the presented token
        (each opens with the one before it) to the token not yet rotated,
        locking each row on the way. None when the window is off or over,
        or the chain does not lead to a live token.
        """
        grace = self._settings.oauth_refresh_grace_s
        if grace <= 0 or row.rotated_s_ago is None or row.rotated_s_ago > grace:
            return None
        holder, current = presented, row
        for _ in range(_MAX_GRACE_HOPS):
            if current.successor_hash is None or current.successor_sealed is None:
                return None  # rotated before successors were kept
            successor = unseal(holder, current.token_hash, current.successor_sealed)
            if successor is None or digest(successor) != current.successor_hash:
                return None
            following = await oauth.lock_refresh_token(conn, current.successor_hash)
            if following is None or following.grant_id != row.grant_id:
                return None
            if following.rotated_at is None:
                return following, successor
            holder, current = successor, following
        return None

    def _access(self, holder: _Holder, scope: str) -> IssuedToken:
        return mint_access_token(
            self._keystore,
            self._settings,
            user_id=holder.user_id,
            client_id=holder.client.client_id,
            scope=scope,
        )

    async def _issue(
        self, conn: AsyncConnection, holder: _Holder, scope: str, refresh: str | None = None
    ) -> TokenResponse:
        """A new access token and a new refresh token (``refresh``, or a fresh one) of the grant."""
        access = self._access(holder, scope)
        refresh = refresh or new_secret()
        await oauth.insert_refresh_token(
            conn,
            token_hash=digest(refresh),
            grant_id=holder.grant_id,
            expires_at=_now() + timedelta(seconds=self._settings.refresh_token_ttl_s),
            access_jti=access.jti,
            # The validator accepts a token until exp + leeway: deny-list it that long.
            access_expires_at=_epoch(access.expires_at + LEEWAY_S),
        )
        issued_refresh = refresh if "refresh_token" in holder.client.grant_types else None
        return TokenResponse(access.token, access.expires_in, scope, issued_refresh)

    async def _reissue(
        self, conn: AsyncConnection, holder: _Holder, scope: str, live_refresh: str
    ) -> TokenResponse:
        """A new access token beside the grant's live refresh token (a replay within the window)."""
        access = self._access(holder, scope)
        await oauth.insert_grace_access_token(
            conn,
            jti=access.jti,
            grant_id=holder.grant_id,
            access_expires_at=_epoch(access.expires_at + LEEWAY_S),
        )
        return TokenResponse(access.token, access.expires_in, scope, live_refresh)

    # -- revocation (RFC 7009) -------------------------------------------------

    async def revoke(self, token: str, token_type_hint: str | None, client: ClientRow) -> None:
        """Revoke a refresh or access token of ``client``; unknown tokens are ignored.

        RFC 7009 §2.2: the answer is 200 whether or not the token was valid,
        so nothing here raises for a bad token. A token of another client
        is left alone, silently (nothing is disclosed about it). Revoking a
        refresh token revokes its whole grant and the access tokens issued
        under it (§2.1: "SHOULD also invalidate all access tokens").
        """
        if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_CHARS:
            return
        looks_like_jwt = token.count(".") == 2
        refresh_first = token_type_hint == "refresh_token" or not looks_like_jwt
        if refresh_first and (await self._revoke_refresh(token, client) or not looks_like_jwt):
            return
        await self._revoke_access(token, client)

    async def _revoke_refresh(self, token: str, client: ClientRow) -> bool:
        if not presentable(token):
            return False
        async with self._pool.connection() as conn, conn.transaction():
            row = await oauth.lock_refresh_token(conn, digest(token))
            if row is None or row.client_id != client.client_id:
                return False
            await end_grant(conn, row.grant_id, "revoked by client")
        return True

    async def _revoke_access(self, token: str, client: ClientRow) -> None:
        try:
            principal = await verify_access_token(self._keystore, self._settings, token)
        except BearerError:
            return  # invalid or expired: nothing to revoke
        if principal.client_id != client.client_id:
            return
        async with self._pool.connection() as conn:
            await oauth.revoke_jti(conn, principal.jti, _epoch(principal.expires_at + LEEWAY_S))

    async def revoke_cli_token(self, token: str) -> bool:
        """Revoke an ``ownsona token`` access token on its own say-so; False if it is not one.

        Such a token has no client to authenticate (see :func:`auth.token_endpoint.revoke`); a valid
        signature is its proof. Anything else is left to :meth:`revoke`.
        """
        if not isinstance(token, str) or token.count(".") != 2 or len(token) > MAX_TOKEN_CHARS:
            return False
        try:
            principal = await verify_access_token(self._keystore, self._settings, token)
        except BearerError:
            return False
        if principal.client_id != CLI_CLIENT_ID:
            return False
        async with self._pool.connection() as conn, conn.transaction():
            await oauth.revoke_jti(conn, principal.jti, _epoch(principal.expires_at + LEEWAY_S))
            await tokens.revoke_cli_jti(conn, principal.jti)
        return True


async def end_grant(conn: AsyncConnection, grant_id: int, reason: str) -> None:
    """Revoke a grant and deny-list its unexpired access tokens, in the caller's transaction.

    Its refresh tokens stop working with the grant; its access tokens would
    otherwise stay valid until they expire.
    """
    await oauth.revoke_grant(conn, grant_id, reason)
    await oauth.deny_grant_access_tokens(conn, grant_id)


def _same_resource(requested: str, resource: str) -> bool:
    return same_resource(requested, resource)  # localhost and 127.0.0.1 name one resource


def _invalid_grant(description: str) -> OAuthError:
    return OAuthError("invalid_grant", description)


def _now() -> datetime:
    return datetime.now(UTC)


def _epoch(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
