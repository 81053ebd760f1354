"""Account SQL: the ``users`` table (SUPPLEMENT §1).

Every function takes a connection so the caller owns the transaction.
Usernames are compared exactly as stored; normalising them is the caller's
business (``auth.accounts`` lower-cases them).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from psycopg import AsyncConnection, sql
from psycopg.rows import class_row

from . import terms
from .rows import select_list

#: ``pg_advisory_xact_lock(class, object)`` key that serialises creating the
#: first account, so two processes starting together do not both create one.
ACCOUNT_BOOTSTRAP_LOCK = (0x4F53_4F4E, 1)


@dataclass(frozen=True)
class UserRow:
    id: int
    username: str
    password_hash: str
    created_at: datetime
    disabled: bool


_COLUMNS = sql.SQL(select_list(UserRow))


async def insert_user(conn: AsyncConnection, username: str, password_hash: str) -> UserRow | None:
    """The new account, or None when the username is already taken.

    ``ON CONFLICT DO NOTHING`` instead of catching ``UniqueViolation`` keeps
    the caller's transaction usable after a duplicate.
    """
    async with conn.cursor(row_factory=class_row(UserRow)) as cur:
        await cur.execute(
            sql.SQL(
                """
            INSERT INTO users (username, password_hash) VALUES (%s, %s)
            ON CONFLICT (username) DO NOTHING
            RETURNING {}
            """
            ).format(_COLUMNS),
            (username, password_hash),
        )
        return await cur.fetchone()


async def get_user_by_username(conn: AsyncConnection, username: str) -> UserRow | None:
    async with conn.cursor(row_factory=class_row(UserRow)) as cur:
        await cur.execute(
            sql.SQL("SELECT {} FROM users WHERE username = %s").format(_COLUMNS), (username,)
        )
        return await cur.fetchone()


async def get_user(conn: AsyncConnection, user_id: int) -> UserRow | None:
    async with conn.cursor(row_factory=class_row(UserRow)) as cur:
        await cur.execute(
            sql.SQL("SELECT {} FROM users WHERE id = %s").format(_COLUMNS), (user_id,)
        )
        return await cur.fetchone()


async def set_password(conn: AsyncConnection, user_id: int, password_hash: str) -> bool:
    """Replace the stored hash; False when there is no such user."""
    cur = await conn.execute(
        "UPDATE users SET password_hash = %s WHERE id = %s", (password_hash, user_id)
    )
    return cur.rowcount == 1


async def has_users(conn: AsyncConnection) -> bool:
    """Whether any account exists (disabled ones count)."""
    cur = await conn.execute("SELECT EXISTS (SELECT 1 FROM users)")
    row = await cur.fetchone()
    return bool(row and row[0])


async def lock_account_bootstrap(conn: AsyncConnection) -> None:
    """Block until this transaction holds the account-bootstrap lock.

    Released at commit or rollback; the caller must be inside a transaction.
    """
    await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", ACCOUNT_BOOTSTRAP_LOCK)


# -- the owner's account commands (issue 12) -----------------------------------


@dataclass(frozen=True)
class AccountSummary:
    """A line of ``ownsona user list``."""

    id: int
    username: str
    created_at: datetime
    disabled: bool
    last_sign_in_at: datetime | None
    memory_count: int


@dataclass(frozen=True)
class DeletedRows:
    """What deleting an account removed with it, for the operator."""

    memories: int
    relations: int
    grants: int
    tokens: int


async def list_accounts(conn: AsyncConnection) -> list[AccountSummary]:
    """Every account with its count of active (not forgotten) memories, by name."""
    async with conn.cursor(row_factory=class_row(AccountSummary)) as cur:
        await cur.execute(
            """
            SELECT u.id, u.username, u.created_at, u.disabled, u.last_sign_in_at,
                (SELECT count(*) FROM memories m
                 WHERE m.user_id = u.id AND m.deleted_at IS NULL) AS memory_count
            FROM users u ORDER BY u.username
            """
        )
        return await cur.fetchall()


async def set_disabled(conn: AsyncConnection, user_id: int, disabled: bool) -> bool:
    """Disable or enable the account; False when there is no such user."""
    cur = await conn.execute("UPDATE users SET disabled = %s WHERE id = %s", (disabled, user_id))
    return cur.rowcount == 1


async def end_tokens(conn: AsyncConnection, user_id: int) -> None:
    """Refuse every access token of the account issued before now (by its iat)."""
    await conn.execute("UPDATE users SET tokens_valid_after = now() WHERE id = %s", (user_id,))


async def record_sign_in(conn: AsyncConnection, user_id: int) -> None:
    await conn.execute("UPDATE users SET last_sign_in_at = now() WHERE id = %s", (user_id,))


async def delete_account(conn: AsyncConnection, user_id: int) -> DeletedRows | None:
    """Delete the account and, by its foreign keys' cascades, everything it owns.

    The counts are taken first in the same transaction; None when there is no
    such user. Call inside a transaction. The user's term counts are locked
    before the account, as every write of the user's memories does
    (``storage.terms``): a write under way finishes first instead of deadlocking.
    """
    await terms.lock_existing_counts(conn, user_id)
    cur = await conn.execute(
        """
        SELECT (SELECT count(*) FROM memories WHERE user_id = %(id)s),
               (SELECT count(*) FROM memory_relations WHERE user_id = %(id)s),
               (SELECT count(*) FROM oauth_grants WHERE user_id = %(id)s),
               (SELECT count(*) FROM cli_tokens WHERE user_id = %(id)s)
        FROM users WHERE id = %(id)s FOR UPDATE
        """,
        {"id": user_id},
    )
    row = await cur.fetchone()
    if row is None:
        return None
    await conn.execute("DELETE FROM users WHERE id = %s", (user_id,))
    return DeletedRows(*(int(v) for v in row))
