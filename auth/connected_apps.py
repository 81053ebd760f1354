"""The owner's connected apps (the console's apps page, issue 15): list them, disconnect one.

An app is an OAuth grant (an assistant the owner allowed on the consent page)
or a CLI token (``ownsona token``). Disconnecting one ends it the way
``ownsona token revoke`` does: a grant's refresh tokens stop refreshing and
its access tokens are deny-listed, a CLI token is deny-listed; the bearer
check consults the deny list on every request, so the app's next call is
refused. Every function checks that the app is the owner's: another
account's grant or token is treated exactly like one that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from auth.client_documents import document_host, is_document_client_id
from auth.grants import end_grant
from storage import receipts, tokens
from storage.tokens import CLI_CLIENT_ID, CliTokenRow, GrantRow

__all__ = [
    "CLI_CLIENT_ID",
    "ConnectedApps",
    "ConnectedGrant",
    "client_names",
    "connected_apps",
    "disconnect_cli_token",
    "disconnect_grant",
    "published_from",
    "writer_label",
]

#: The reason recorded on a grant the owner disconnected in the console.
_DISCONNECTED = "disconnected by the owner in the console"


@dataclass(frozen=True)
class ConnectedGrant:
    grant: GrantRow
    #: The host a metadata-document client is published from; None: dynamically registered.
    published_from: str | None


@dataclass(frozen=True)
class ConnectedApps:
    grants: list[ConnectedGrant]
    cli_tokens: list[CliTokenRow]


def published_from(client_id: str) -> str | None:
    """Where a metadata-document client id is published (its URL's host); None if registered."""
    return document_host(client_id) if is_document_client_id(client_id) else None


async def connected_apps(pool: AsyncConnectionPool, user_id: int) -> ConnectedApps:
    """The live OAuth grants and CLI tokens of one account, oldest first."""
    async with pool.connection() as conn:
        grants = await tokens.live_grants(conn, user_id)
        cli = await tokens.live_cli_tokens(conn, user_id)
    return ConnectedApps(
        grants=[ConnectedGrant(g, published_from(g.client_id)) for g in grants], cli_tokens=cli
    )


async def disconnect_grant(
    pool: AsyncConnectionPool, user_id: int, grant_id: int, *, operation: str | None = None
) -> bool:
    """End the owner's grant and its access tokens; False when it is not their live grant.

    ``operation``: the form's operation key. The same form submitted again (a double
    click, a reload) answers as the first did and ends nothing twice.
    """
    async with pool.connection() as conn, conn.transaction():
        key = _operation_key(operation, "grant", grant_id)
        if key is not None and await _done_before(conn, user_id, key):
            return True
        if await tokens.grant_owner(conn, grant_id) != user_id:
            return False
        await end_grant(conn, grant_id, _DISCONNECTED)
        await _remember_done(conn, user_id, key, "disconnect_grant")
        return True


async def disconnect_cli_token(
    pool: AsyncConnectionPool, user_id: int, token_id: int, *, operation: str | None = None
) -> bool:
    """Deny-list the owner's CLI token; False when it is not their live token.

    ``operation`` as for :func:`disconnect_grant`.
    """
    async with pool.connection() as conn, conn.transaction():
        key = _operation_key(operation, "cli-token", token_id)
        if key is not None and await _done_before(conn, user_id, key):
            return True
        if await tokens.cli_token_owner(conn, token_id) != user_id:
            return False
        if not await tokens.revoke_cli_token(conn, token_id):
            return False
        await _remember_done(conn, user_id, key, "disconnect_cli_token")
        return True


# A disconnect done under a form's operation key leaves a write receipt (the table that
# makes tool writes happen at most once per key), in the disconnect's own transaction:
# a repeat finds it in any web process, and the advisory lock holds a concurrent repeat
# until the first has committed. The key names the app too: one page's forms share a key.


def _operation_key(operation: str | None, kind: str, app_id: int) -> str | None:
    return f"console-disconnect:{kind}:{app_id}:{operation}" if operation else None


async def _done_before(conn: AsyncConnection, user_id: int, key: str) -> bool:
    await receipts.lock_receipt_key(conn, user_id, key)
    return await receipts.receipt_exists(conn, user_id, key)


async def _remember_done(conn: AsyncConnection, user_id: int, key: str | None, what: str) -> None:
    if key is not None:
        await receipts.put_receipt(conn, user_id, key, what, {"ok": True})


async def writer_label(
    pool: AsyncConnectionPool, user_id: int, client_id: str, token_jti: str | None
) -> str | None:
    """What the apps page calls the app that wrote a memory: an OAuth client's name, a CLI
    token's label; None when it has none (the caller names it otherwise)."""
    async with pool.connection() as conn:
        if client_id == CLI_CLIENT_ID:
            return await tokens.cli_token_label(conn, user_id, token_jti) if token_jti else None
        return (await tokens.client_names(conn, [client_id])).get(client_id)


async def client_names(pool: AsyncConnectionPool, client_ids: list[str]) -> dict[str, str]:
    """The names OAuth clients gave themselves, for the ids that have one."""
    wanted = [c for c in client_ids if c != CLI_CLIENT_ID]
    if not wanted:
        return {}
    async with pool.connection() as conn:
        return await tokens.client_names(conn, wanted)
