"""Accounts: creating them, the start-up login account, password sign-in.

Rules (SUPPLEMENT §1):

- A username is 1..64 characters of ``[A-Za-z0-9._@-]``. Usernames are
  case-insensitive: surrounding whitespace is dropped and they are stored
  and looked up in lower case, so "Alice" and "alice" are one account.
- A password has 8..1024 characters (the upper bound only stops absurd
  inputs; argon2 itself takes any length).
- Hashing runs in a worker thread: argon2 costs tens of milliseconds of CPU.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from auth.errors import AccountError
from auth.grants import end_grant
from auth.passwords import dummy_verify, hash_password, needs_rehash, verify_password
from config.settings import Settings
from storage import oauth as oauth_store
from storage import tokens as token_store
from storage import users

#: The account created on first start when no username is configured.
DEFAULT_USERNAME = "owner"
MAX_USERNAME_CHARS = 64
MIN_PASSWORD_CHARS = 8
MAX_PASSWORD_CHARS = 1024

_USERNAME = re.compile(r"[a-z0-9._@-]{1,64}")


@dataclass(frozen=True)
class LoginAccount:
    """What :func:`ensure_login_user` did, for ``ownsona serve`` to announce."""

    user_id: int
    username: str
    #: Set only when this call created the account with a generated password:
    #: print it once, it is stored nowhere in clear.
    generated_password: str | None
    #: True when this call created the account.
    created: bool = False
    #: True when the stored password was replaced by OWNSONA_LOGIN_PASSWORD.
    password_updated: bool = False


def normalize_username(username: str) -> str:
    """The stored form of a username; :class:`AccountError` when it breaks the rules."""
    name = username.strip().lower()
    if not _USERNAME.fullmatch(name):
        raise AccountError(
            "invalid_username",
            f"A username has 1 to {MAX_USERNAME_CHARS} characters: "
            "letters, digits, '.', '_', '@', '-'.",
        )
    return name


def check_password(password: str) -> None:
    """:class:`AccountError` when the password breaks the length rules."""
    if not MIN_PASSWORD_CHARS <= len(password) <= MAX_PASSWORD_CHARS:
        raise AccountError(
            "invalid_password",
            f"A password has {MIN_PASSWORD_CHARS} to {MAX_PASSWORD_CHARS} characters.",
        )


def generate_password() -> str:
    """A random password: 24 URL-safe characters, 144 bits."""
    return secrets.token_urlsafe(18)


async def add_user(
    pool_or_conn: AsyncConnectionPool | AsyncConnection, username: str, password: str
) -> int:
    """Create an account and return its id.

    Given a connection, the insert joins the caller's transaction (nothing is
    committed here); given a pool, it commits on its own. Raises
    :class:`AccountError` for a bad username or password or a taken username.
    """
    name = normalize_username(username)
    check_password(password)
    password_hash = await asyncio.to_thread(hash_password, password)
    async with _connection(pool_or_conn) as conn:
        row = await users.insert_user(conn, name, password_hash)
    if row is None:
        raise AccountError("duplicate_username", f"The username {name!r} is already taken.")
    return row.id


async def change_password(pool: AsyncConnectionPool, username: str, password: str) -> int:
    """Give an existing account a new password; return its id.

    Everything the old password opened ends with it: browser sign-ins (the
    OAuth login session cookie), every refresh-token family (refreshing gets
    ``invalid_grant``) and every access token issued before now (refused at
    /mcp by their ``iat``, see :func:`end_access`). Raises
    :class:`AccountError` for a bad password or an unknown username.
    """
    name = normalize_username(username)
    check_password(password)
    password_hash = await asyncio.to_thread(hash_password, password)
    async with pool.connection() as conn, conn.transaction():
        row = await users.get_user_by_username(conn, name)
        if row is None:
            raise AccountError(
                "unknown_user", f"There is no account {name!r}; create it with `ownsona user add`."
            )
        await users.set_password(conn, row.id, password_hash)
        await end_access(conn, row.id, "password changed")
    return row.id


async def end_access(conn: AsyncConnection, user_id: int, reason: str) -> int:
    """End every way in the account has: sign-ins, refresh families, access tokens.

    Access tokens are not listed one by one: the account's ``tokens_valid_after``
    becomes now, and the bearer check refuses any token with an earlier ``iat``.
    Returns how many OAuth grants were revoked. Runs in the caller's transaction.
    """
    await oauth_store.delete_user_sessions(conn, user_id)
    await users.end_tokens(conn, user_id)
    await token_store.revoke_all_cli_tokens(conn, user_id)
    grant_ids = await token_store.user_grant_ids(conn, user_id)
    for grant_id in grant_ids:
        await end_grant(conn, grant_id, reason)
    return len(grant_ids)


async def find_account(conn: AsyncConnection, username: str) -> users.UserRow:
    """The account named ``username``; :class:`AccountError` ``unknown_user`` otherwise."""
    name = normalize_username(username)
    row = await users.get_user_by_username(conn, name)
    if row is None:
        raise AccountError(
            "unknown_user", f"There is no account {name!r}; see `ownsona user list`."
        )
    return row


async def list_accounts(pool: AsyncConnectionPool) -> list[users.AccountSummary]:
    """Every account, by name, with its sign-in and active-memory count (``ownsona user list``)."""
    async with pool.connection() as conn:
        return await users.list_accounts(conn)


async def set_disabled(pool: AsyncConnectionPool, username: str, disabled: bool) -> int:
    """Disable or enable an account; return its id.

    A disabled account's tokens are refused at /mcp on their next request, it
    cannot sign in or refresh, and its browser sign-ins end. Enabling gives
    back the tokens that have not expired meanwhile (disabling revokes nothing).
    """
    async with pool.connection() as conn, conn.transaction():
        row = await find_account(conn, username)
        await users.set_disabled(conn, row.id, disabled)
        if disabled:
            await oauth_store.delete_user_sessions(conn, row.id)
    return row.id


async def delete_account(
    pool: AsyncConnectionPool,
    username: str,
    *,
    destroy_key: Callable[[int], Awaitable[object]] | None = None,
) -> users.DeletedRows:
    """Delete an account with its memories, relations, grants, sessions and tokens.

    ``destroy_key``: destroys the user's data key (sealing at rest, crypto-shredding),
    called before the rows go, inside the deletion's transaction: if it fails nothing
    is deleted; if the deletion then fails, the rows stay but no longer open
    (docs/at-rest.md, "Deleting a user").
    """
    async with pool.connection() as conn, conn.transaction():
        row = await find_account(conn, username)
        if destroy_key is not None:
            await destroy_key(row.id)
        deleted = await users.delete_account(conn, row.id)
    if deleted is None:  # deleted by someone else between the two statements
        raise AccountError("unknown_user", f"There is no account {row.username!r}.")
    return deleted


async def ensure_login_user(pool: AsyncConnectionPool, settings: Settings) -> LoginAccount | None:
    """Make sure the start-up login account exists; call once per process at start-up.

    - ``OWNSONA_LOGIN_USERNAME`` set (or only ``OWNSONA_LOGIN_PASSWORD``, which
      then belongs to ``owner``): that account is created if missing, with the
      configured password or, without one, a generated one. If it exists and
      a password is configured, the environment is the source of truth in
      single-user mode: a different stored password is replaced (existing
      tokens stay valid; a disabled account stays disabled).
    - Nothing set: on an empty database, ``owner`` is created with a generated
      password; when any account exists, nothing happens and None is returned.

    A transaction-level advisory lock makes processes starting together agree:
    exactly one of them creates the account and sees the generated password.
    Raises :class:`AccountError` naming the variable when a configured value
    breaks the rules.
    """
    username_setting, password_setting = settings.login_username, settings.login_password
    if password_setting is not None:
        try:
            check_password(password_setting)
        except AccountError as ex:
            raise AccountError(ex.problem, f"OWNSONA_LOGIN_PASSWORD: {ex.message}") from None

    if username_setting is None and password_setting is None:
        async with pool.connection() as conn, conn.transaction():
            await users.lock_account_bootstrap(conn)
            if await users.has_users(conn):
                return None
            return await _create(conn, DEFAULT_USERNAME, None)

    try:
        username = normalize_username(username_setting or DEFAULT_USERNAME)
    except AccountError as ex:
        raise AccountError(ex.problem, f"OWNSONA_LOGIN_USERNAME: {ex.message}") from None

    async with pool.connection() as conn, conn.transaction():
        await users.lock_account_bootstrap(conn)
        row = await users.get_user_by_username(conn, username)
        if row is None:
            return await _create(conn, username, password_setting)
        updated = False
        if password_setting is not None:
            matches = await asyncio.to_thread(verify_password, row.password_hash, password_setting)
            if not matches or needs_rehash(row.password_hash):
                new_hash = await asyncio.to_thread(hash_password, password_setting)
                await users.set_password(conn, row.id, new_hash)
                updated = not matches
        return LoginAccount(row.id, row.username, None, password_updated=updated)


async def authenticate_password(
    pool: AsyncConnectionPool, username: str, password: str
) -> int | None:
    """The user id when the username and password match an enabled account, else None.

    Unknown and malformed usernames still pay for one argon2 verification, so
    timing does not tell which accounts exist. A disabled account with the
    right password raises :class:`AccountError` ``account_disabled``: whoever
    knows the password may learn that the account is disabled, nobody else
    can. A hash made with outdated parameters is upgraded on success; the
    sign-in is recorded (``ownsona user list`` shows it).
    """
    try:
        name = normalize_username(username)
    except AccountError:
        name = None
    if name is None or not 0 < len(password) <= MAX_PASSWORD_CHARS:
        await asyncio.to_thread(dummy_verify, password[:MAX_PASSWORD_CHARS])
        return None
    # The connection goes back to the pool before hashing: argon2 is slow.
    async with pool.connection() as conn:
        row = await users.get_user_by_username(conn, name)
    if row is None:
        await asyncio.to_thread(dummy_verify, password)
        return None
    if not await asyncio.to_thread(verify_password, row.password_hash, password):
        return None
    if row.disabled:
        raise AccountError(
            "account_disabled", "This account is disabled. Ask the server's owner to enable it."
        )
    new_hash = None
    if needs_rehash(row.password_hash):
        new_hash = await asyncio.to_thread(hash_password, password)
    async with pool.connection() as conn:
        if new_hash is not None:
            await users.set_password(conn, row.id, new_hash)
        await users.record_sign_in(conn, row.id)
    return row.id


async def _create(conn: AsyncConnection, username: str, password: str | None) -> LoginAccount:
    generated: str | None = None
    if password is None:
        generated = secret = generate_password()
    else:
        secret = password
    password_hash = await asyncio.to_thread(hash_password, secret)
    row = await users.insert_user(conn, username, password_hash)
    if row is None:
        # Only an `ownsona user add` racing us outside the bootstrap lock gets here.
        raise AccountError("duplicate_username", f"The username {username!r} is already taken.")
    return LoginAccount(row.id, row.username, generated, created=True)


@asynccontextmanager
async def _connection(
    pool_or_conn: AsyncConnectionPool | AsyncConnection,
) -> AsyncIterator[AsyncConnection]:
    if isinstance(pool_or_conn, AsyncConnection):
        yield pool_or_conn
    else:
        async with pool_or_conn.connection() as conn:
            yield conn
