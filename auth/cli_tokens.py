"""``ownsona token``'s use cases: mint a CLI token, list what is live, revoke it.

A CLI token is an ordinary access token (:mod:`auth.tokens`) issued to the
``ownsona-cli`` client. Only its ``jti`` is recorded, with the account, label,
scope and lifetime, so that ``ownsona token list`` can show it and ``revoke``
can deny-list it; the token itself is returned once and stored nowhere.
Listing also shows each account's OAuth grants, and revoking one ends it the
way a password change does: its refresh tokens and its access tokens.
"""

from __future__ import annotations

from datetime import UTC, datetime

from psycopg_pool import AsyncConnectionPool

from auth.accounts import end_access, find_account, normalize_username
from auth.errors import AccountError
from auth.grants import end_grant
from auth.keys import KeyStore
from auth.tokens import mint_access_token
from config.settings import Settings
from storage import tokens, users
from storage.tokens import CliTokenRow, GrantRow

#: The reason recorded on a grant the owner revoked from the command line.
_REVOKED_BY_OWNER = "revoked by the owner"


async def mint_cli_token(
    pool: AsyncConnectionPool,
    settings: Settings,
    *,
    username: str,
    scope: str,
    ttl_s: int | None,
    label: str | None,
) -> str:
    """A fresh access token speaking for ``username``, recorded for ``token list``.

    ``ttl_s`` None means ``ACCESS_TOKEN_TTL``. Raises :class:`AccountError`
    ``unknown_user`` when there is no such account and ``account_disabled``
    when it is disabled; both messages tell the operator which command to run.
    The signing keys are read (the first one created) only once the account
    may have a token.
    """
    name = normalize_username(username)
    async with pool.connection() as conn:
        user = await users.get_user_by_username(conn, name)
    if user is None:
        raise AccountError(
            "unknown_user", f"No account named {username!r}; create it with `ownsona user add`."
        )
    if user.disabled:
        # A disabled account keeps its memories; it only needs enabling again.
        raise AccountError(
            "account_disabled",
            f"The account {name!r} is disabled; enable it with `ownsona user enable {name}`.",
        )
    keystore = KeyStore(pool, access_token_ttl_s=settings.access_token_ttl_s)
    await keystore.load()
    issued = mint_access_token(
        keystore,
        settings,
        user_id=user.id,
        client_id=tokens.CLI_CLIENT_ID,
        scope=scope,
        ttl_s=ttl_s,
    )
    async with pool.connection() as conn:
        await tokens.insert_cli_token(
            conn,
            jti=issued.jti,
            user_id=user.id,
            label=label,
            scope=scope,
            issued_at=datetime.fromtimestamp(issued.issued_at, UTC),
            expires_at=datetime.fromtimestamp(issued.expires_at, UTC),
        )
    return issued.token


async def live_tokens(
    pool: AsyncConnectionPool, username: str | None
) -> tuple[list[CliTokenRow], list[GrantRow]]:
    """The unexpired, unrevoked CLI tokens and OAuth grants of one account, or of all.

    Raises :class:`AccountError` ``unknown_user`` for a name with no account.
    """
    async with pool.connection() as conn:
        user_id = (await find_account(conn, username)).id if username else None
        return await tokens.live_cli_tokens(conn, user_id), await tokens.live_grants(conn, user_id)


async def revoke_cli_token(pool: AsyncConnectionPool, token_id: int) -> bool:
    """Deny-list one CLI token at once; False when there is no such live token."""
    async with pool.connection() as conn, conn.transaction():
        return await tokens.revoke_cli_token(conn, token_id)


async def revoke_grant(pool: AsyncConnectionPool, grant_id: int) -> bool:
    """End one OAuth grant and its access tokens; False when there is no such live grant."""
    async with pool.connection() as conn, conn.transaction():
        if await tokens.grant_owner(conn, grant_id) is None:
            return False
        await end_grant(conn, grant_id, _REVOKED_BY_OWNER)
        return True


async def revoke_all(pool: AsyncConnectionPool, username: str) -> int:
    """End every token and grant of the account; how many OAuth grants were revoked.

    Raises :class:`AccountError` ``unknown_user`` for a name with no account.
    """
    async with pool.connection() as conn, conn.transaction():
        user = await find_account(conn, username)
        return await end_access(conn, user.id, _REVOKED_BY_OWNER)
