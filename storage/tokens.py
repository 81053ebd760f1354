"""Access-token SQL: the bearer check's one statement, ``ownsona token``'s records,
listing and revoking what an account holds (issue 12).

Every function takes a connection so the caller owns the transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from psycopg import AsyncConnection
from psycopg.rows import class_row

#: The ``client_id`` claim of tokens minted by ``ownsona token``.
CLI_CLIENT_ID = "ownsona-cli"

#: "last used" is refreshed at most this often per token (or grant), so the
#: bearer check writes about once a minute per token, not once per request.
LAST_USED_EVERY_S = 60


@dataclass(frozen=True)
class TokenStanding:
    """What the bearer check needs beyond the signature: is the account still there?"""

    disabled: bool
    #: ``users.tokens_valid_after`` in seconds since the epoch, or None.
    tokens_valid_after: float | None
    revoked: bool


@dataclass(frozen=True)
class CliTokenRow:
    id: int
    jti: str
    user_id: int
    username: str
    label: str | None
    scope: str
    issued_at: datetime
    expires_at: datetime
    last_used_at: datetime | None


@dataclass(frozen=True)
class GrantRow:
    id: int
    user_id: int
    username: str
    client_id: str
    client_name: str | None
    scope: str
    created_at: datetime
    last_used_at: datetime | None
    #: When its newest refresh token expires.
    expires_at: datetime | None


_STANDING = """
SELECT u.disabled, extract(epoch FROM u.tokens_valid_after)::float8,
    EXISTS (SELECT 1 FROM oauth_revoked_tokens r WHERE r.jti = %(jti)s)
FROM users u WHERE u.id = %(user_id)s
"""

# A data-modifying WITH runs exactly once even when the main query ignores it
# (PostgreSQL, "Data-Modifying Statements in WITH"): the touch rides on the
# read and writes nothing unless "last used" is over a minute old.
_TOUCH_CLI = """
WITH touched AS (
    UPDATE cli_tokens SET last_used_at = now()
    WHERE jti = %(jti)s
      AND (last_used_at IS NULL OR last_used_at < now() - make_interval(secs => %(every)s))
)
"""
_TOUCH_GRANT = """
WITH touched AS (
    UPDATE oauth_grants g SET last_used_at = now()
    FROM oauth_refresh_tokens t
    WHERE t.access_jti = %(jti)s AND g.id = t.grant_id
      AND (g.last_used_at IS NULL OR g.last_used_at < now() - make_interval(secs => %(every)s))
)
"""


async def token_standing(
    conn: AsyncConnection, *, jti: str, user_id: int, client_id: str, touch: bool = True
) -> TokenStanding | None:
    """The account's standing for a verified token; None when the user does not exist.

    One statement: the account row, the deny-list lookup and, with ``touch``
    and when over a minute old, the token's (or its grant's) "last used".
    """
    touch_sql = ""
    if touch:
        touch_sql = _TOUCH_CLI if client_id == CLI_CLIENT_ID else _TOUCH_GRANT
    cur = await conn.execute(
        touch_sql + _STANDING, {"jti": jti, "user_id": user_id, "every": float(LAST_USED_EVERY_S)}
    )
    row = await cur.fetchone()
    if row is None:
        return None
    return TokenStanding(disabled=bool(row[0]), tokens_valid_after=row[1], revoked=bool(row[2]))


async def insert_cli_token(
    conn: AsyncConnection,
    *,
    jti: str,
    user_id: int,
    label: str | None,
    scope: str,
    issued_at: datetime,
    expires_at: datetime,
) -> int:
    cur = await conn.execute(
        """
        INSERT INTO cli_tokens (jti, user_id, label, scope, issued_at, expires_at)
        VALUES (%s, %s, %s, %s, %s, %s) RETURNING id
        """,
        (jti, user_id, label, scope, issued_at, expires_at),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def live_cli_tokens(conn: AsyncConnection, user_id: int | None) -> list[CliTokenRow]:
    """Unexpired, unrevoked CLI tokens (of one user, or all), oldest first."""
    async with conn.cursor(row_factory=class_row(CliTokenRow)) as cur:
        await cur.execute(
            """
            SELECT t.id, t.jti, t.user_id, u.username, t.label, t.scope, t.issued_at,
                t.expires_at, t.last_used_at
            FROM cli_tokens t JOIN users u ON u.id = t.user_id
            WHERE t.revoked_at IS NULL AND t.expires_at > now()
              AND (u.tokens_valid_after IS NULL OR t.issued_at >= u.tokens_valid_after)
              AND (%(user_id)s::bigint IS NULL OR t.user_id = %(user_id)s)
            ORDER BY t.id
            """,
            {"user_id": user_id},
        )
        return await cur.fetchall()


async def live_grants(conn: AsyncConnection, user_id: int | None) -> list[GrantRow]:
    """Unrevoked OAuth grants with an unexpired refresh token, oldest first."""
    async with conn.cursor(row_factory=class_row(GrantRow)) as cur:
        await cur.execute(
            """
            SELECT g.id, g.user_id, u.username, g.client_id, c.client_name, g.scope,
                g.created_at, g.last_used_at, max(t.expires_at) AS expires_at
            FROM oauth_grants g
            JOIN users u ON u.id = g.user_id
            JOIN oauth_clients c ON c.client_id = g.client_id
            JOIN oauth_refresh_tokens t ON t.grant_id = g.id AND t.rotated_at IS NULL
            WHERE g.revoked_at IS NULL AND t.expires_at > now()
              AND (%(user_id)s::bigint IS NULL OR g.user_id = %(user_id)s)
            GROUP BY g.id, u.username, c.client_name
            ORDER BY g.id
            """,
            {"user_id": user_id},
        )
        return await cur.fetchall()


async def revoke_cli_token(conn: AsyncConnection, token_id: int) -> bool:
    """Deny-list one CLI token; False when there is no such live token."""
    cur = await conn.execute(
        """
        WITH revoked AS (
            UPDATE cli_tokens SET revoked_at = now()
            WHERE id = %s AND revoked_at IS NULL
            RETURNING jti, expires_at
        )
        INSERT INTO oauth_revoked_tokens (jti, expires_at)
        SELECT jti, expires_at + interval '1 minute' FROM revoked
        ON CONFLICT (jti) DO NOTHING
        RETURNING 1
        """,
        (token_id,),
    )
    return cur.rowcount == 1


async def revoke_cli_jti(conn: AsyncConnection, jti: str) -> None:
    """Mark the CLI token with this jti revoked (the deny-list entry is the caller's)."""
    await conn.execute(
        "UPDATE cli_tokens SET revoked_at = now() WHERE jti = %s AND revoked_at IS NULL", (jti,)
    )


async def revoke_all_cli_tokens(conn: AsyncConnection, user_id: int) -> int:
    cur = await conn.execute(
        "UPDATE cli_tokens SET revoked_at = now() WHERE user_id = %s AND revoked_at IS NULL"
        " AND expires_at > now()",
        (user_id,),
    )
    return cur.rowcount


async def user_grant_ids(conn: AsyncConnection, user_id: int) -> list[int]:
    cur = await conn.execute(
        "SELECT id FROM oauth_grants WHERE user_id = %s AND revoked_at IS NULL ORDER BY id",
        (user_id,),
    )
    return [int(r[0]) for r in await cur.fetchall()]


async def grant_owner(conn: AsyncConnection, grant_id: int) -> int | None:
    """The user of an unrevoked grant, else None."""
    cur = await conn.execute(
        "SELECT user_id FROM oauth_grants WHERE id = %s AND revoked_at IS NULL", (grant_id,)
    )
    row = await cur.fetchone()
    return int(row[0]) if row else None


# -- the console's apps page (issue 15) ------------------------------------------------


async def cli_token_owner(conn: AsyncConnection, token_id: int) -> int | None:
    """The user of an unrevoked CLI token, else None."""
    cur = await conn.execute(
        "SELECT user_id FROM cli_tokens WHERE id = %s AND revoked_at IS NULL", (token_id,)
    )
    row = await cur.fetchone()
    return int(row[0]) if row else None


async def cli_token_label(conn: AsyncConnection, user_id: int, jti: str) -> str | None:
    """The label of the user's CLI token with this jti, live or not; None: none or unlabelled."""
    cur = await conn.execute(
        "SELECT label FROM cli_tokens WHERE user_id = %s AND jti = %s", (user_id, jti)
    )
    row = await cur.fetchone()
    return str(row[0]) if row and row[0] else None


async def client_names(conn: AsyncConnection, client_ids: list[str]) -> dict[str, str]:
    """The registered or published names of these OAuth clients (those that have one)."""
    cur = await conn.execute(
        "SELECT client_id, client_name FROM oauth_clients"
        " WHERE client_id = ANY(%s) AND client_name IS NOT NULL",
        (client_ids,),
    )
    return {str(r[0]): str(r[1]) for r in await cur.fetchall()}
