"""OAuth SQL: clients, codes, grants and refresh tokens, revocations, sessions (SUPPLEMENT §8).

Every function takes a connection so the caller owns the transaction.
Secrets arrive here already hashed (``auth`` hashes them); nothing in these
tables can be replayed as a credential.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from .rows import select_list


@dataclass(frozen=True)
class NewClient:
    """A client to store: registered (:func:`insert_client`) or from its metadata document."""

    client_id: str
    client_name: str | None
    redirect_uris: list[str]
    grant_types: list[str]
    response_types: list[str]
    scope: str
    token_endpoint_auth_method: str
    application_type: str | None
    metadata: dict[str, Any]


@dataclass(frozen=True)
class ClientRow(NewClient):
    """A stored client: its fields, its secret's digest (None: a public client), when it came."""

    client_secret_hash: str | None
    created_at: datetime
    #: When the client's metadata document was last fetched; None for a registered client.
    document_fetched_at: datetime | None = None


#: The columns of a :class:`ClientRow`, for a SELECT or RETURNING list.
CLIENT_COLUMNS = sql.SQL(select_list(ClientRow))


@dataclass(frozen=True)
class CodeRow:
    code_hash: str
    client_id: str
    user_id: int
    redirect_uri: str
    code_challenge: str
    scope: str
    resource: str
    expires_at: datetime
    #: The value before this redemption attempt: not None means a replay.
    used_at: datetime | None
    grant_id: int | None


@dataclass(frozen=True)
class RefreshTokenRow:
    """A refresh token joined with its grant and the grant's user."""

    token_hash: str
    grant_id: int
    expires_at: datetime
    rotated_at: datetime | None
    client_id: str
    user_id: int
    scope: str
    resource: str
    grant_revoked_at: datetime | None
    user_disabled: bool
    #: Seconds since it was rotated, on the database's clock; None while it is live.
    rotated_s_ago: float | None
    #: The digest of the token it was rotated into, and that token sealed under its own value.
    successor_hash: str | None
    successor_sealed: bytes | None


# -- clients ------------------------------------------------------------------


def client_values(client: NewClient) -> tuple[Any, ...]:
    """The columns of ``oauth_clients`` a :class:`NewClient` fills, but its secret, in order."""
    return (
        client.client_name,
        client.redirect_uris,
        client.grant_types,
        client.response_types,
        client.scope,
        client.token_endpoint_auth_method,
        client.application_type,
        Jsonb(client.metadata),
    )


#: The columns :func:`client_values` fills, after ``client_id`` and ``client_secret_hash``.
CLIENT_INSERT_COLUMNS = sql.SQL(
    "client_id, client_secret_hash, client_name, redirect_uris,"
    " grant_types, response_types, scope, token_endpoint_auth_method, application_type,"
    " metadata"
)


async def insert_client(
    conn: AsyncConnection, client: NewClient, *, client_secret_hash: str | None
) -> ClientRow:
    async with conn.cursor(row_factory=class_row(ClientRow)) as cur:
        await cur.execute(
            sql.SQL(
                """
            INSERT INTO oauth_clients ({columns})
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
            RETURNING {returned}
            """
            ).format(columns=CLIENT_INSERT_COLUMNS, returned=CLIENT_COLUMNS),
            (client.client_id, client_secret_hash, *client_values(client)),
        )
        row = await cur.fetchone()
        assert row is not None
        return row


async def get_client(conn: AsyncConnection, client_id: str) -> ClientRow | None:
    async with conn.cursor(row_factory=class_row(ClientRow)) as cur:
        await cur.execute(
            sql.SQL("SELECT {} FROM oauth_clients WHERE client_id = %s").format(CLIENT_COLUMNS),
            (client_id,),
        )
        return await cur.fetchone()


# -- authorization codes ------------------------------------------------------


async def insert_code(
    conn: AsyncConnection,
    *,
    code_hash: str,
    client_id: str,
    user_id: int,
    redirect_uri: str,
    code_challenge: str,
    scope: str,
    resource: str,
    expires_at: datetime,
) -> None:
    await conn.execute(
        """
        INSERT INTO oauth_codes (code_hash, client_id, user_id, redirect_uri, code_challenge,
            scope, resource, expires_at)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
        """,
        (code_hash, client_id, user_id, redirect_uri, code_challenge, scope, resource, expires_at),
    )


async def claim_code(conn: AsyncConnection, code_hash: str) -> CodeRow | None:
    """Mark the code used and return it as it was before (``used_at`` None on first use).

    The row lock makes two concurrent redemptions see each other: exactly
    one of them gets ``used_at`` None.
    """
    # least(), not coalesce(): the first use's time either way (least ignores a NULL),
    # and Citus refuses a function inside COALESCE in an UPDATE.
    async with conn.cursor(row_factory=class_row(CodeRow)) as cur:
        await cur.execute(
            """
            WITH old AS (SELECT * FROM oauth_codes WHERE code_hash = %s FOR UPDATE)
            UPDATE oauth_codes c SET used_at = least(c.used_at, now())
            FROM old WHERE c.code_hash = old.code_hash
            RETURNING old.code_hash, old.client_id, old.user_id, old.redirect_uri,
                old.code_challenge, old.scope, old.resource, old.expires_at, old.used_at,
                old.grant_id
            """,
            (code_hash,),
        )
        return await cur.fetchone()


async def set_code_grant(conn: AsyncConnection, code_hash: str, grant_id: int) -> None:
    await conn.execute(
        "UPDATE oauth_codes SET grant_id = %s WHERE code_hash = %s", (grant_id, code_hash)
    )


# -- grants and refresh tokens ---------------------------------------------------


async def insert_grant(
    conn: AsyncConnection, *, client_id: str, user_id: int, scope: str, resource: str
) -> int:
    cur = await conn.execute(
        """
        INSERT INTO oauth_grants (client_id, user_id, scope, resource) VALUES (%s, %s, %s, %s)
        RETURNING id
        """,
        (client_id, user_id, scope, resource),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def revoke_grant(conn: AsyncConnection, grant_id: int, reason: str) -> bool:
    """Revoke the grant (its refresh tokens stop working); False if already revoked."""
    cur = await conn.execute(
        """
        UPDATE oauth_grants SET revoked_at = now(), revoked_reason = %s
        WHERE id = %s AND revoked_at IS NULL
        """,
        (reason, grant_id),
    )
    return cur.rowcount == 1


async def deny_grant_access_tokens(conn: AsyncConnection, grant_id: int) -> int:
    """Deny-list every unexpired access token issued under the grant; how many.

    Those issued with a refresh token and those issued on a replay within the
    grace window (:func:`insert_grace_access_token`).
    """
    cur = await conn.execute(
        """
        INSERT INTO oauth_revoked_tokens (jti, expires_at)
        SELECT access_jti, access_expires_at FROM oauth_refresh_tokens
        WHERE grant_id = %(grant)s AND access_expires_at > now()
        UNION ALL
        SELECT jti, access_expires_at FROM oauth_grace_access_tokens
        WHERE grant_id = %(grant)s AND access_expires_at > now()
        ON CONFLICT (jti) DO NOTHING
        """,
        {"grant": grant_id},
    )
    return cur.rowcount


async def insert_refresh_token(
    conn: AsyncConnection,
    *,
    token_hash: str,
    grant_id: int,
    expires_at: datetime,
    access_jti: str,
    access_expires_at: datetime,
) -> None:
    await conn.execute(
        """
        INSERT INTO oauth_refresh_tokens (token_hash, grant_id, expires_at, access_jti,
            access_expires_at)
        VALUES (%s, %s, %s, %s, %s)
        """,
        (token_hash, grant_id, expires_at, access_jti, access_expires_at),
    )


async def lock_refresh_token(conn: AsyncConnection, token_hash: str) -> RefreshTokenRow | None:
    """The token with its grant, both locked until the end of the transaction."""
    async with conn.cursor(row_factory=class_row(RefreshTokenRow)) as cur:
        await cur.execute(
            """
            SELECT t.token_hash, t.grant_id, t.expires_at, t.rotated_at, g.client_id, g.user_id,
                g.scope, g.resource, g.revoked_at AS grant_revoked_at,
                u.disabled AS user_disabled,
                extract(epoch FROM clock_timestamp() - t.rotated_at)::float8 AS rotated_s_ago,
                t.successor_hash, t.successor_sealed
            FROM oauth_refresh_tokens t
            JOIN oauth_grants g ON g.id = t.grant_id
            JOIN users u ON u.id = g.user_id
            WHERE t.token_hash = %s
            FOR UPDATE OF t, g
            """,
            (token_hash,),
        )
        return await cur.fetchone()


async def mark_rotated(
    conn: AsyncConnection, token_hash: str, *, successor_hash: str, successor_sealed: bytes
) -> None:
    """Record that the token was exchanged for its successor (kept sealed for the grace window).

    ``statement_timestamp()``: this statement's own time, not the transaction's start
    (which may have waited on the row lock); stable, where ``clock_timestamp()`` is
    volatile, which Citus refuses in an UPDATE of a distributed or reference table.
    """
    await conn.execute(
        """
        UPDATE oauth_refresh_tokens
        SET rotated_at = statement_timestamp(), successor_hash = %s, successor_sealed = %s
        WHERE token_hash = %s
        """,
        (successor_hash, successor_sealed, token_hash),
    )


async def insert_grace_access_token(
    conn: AsyncConnection, *, jti: str, grant_id: int, access_expires_at: datetime
) -> None:
    """Record an access token issued on a replay within the grace window, for revocation."""
    await conn.execute(
        """
        INSERT INTO oauth_grace_access_tokens (jti, grant_id, access_expires_at)
        VALUES (%s, %s, %s)
        """,
        (jti, grant_id, access_expires_at),
    )


# -- access-token deny list ---------------------------------------------------


async def revoke_jti(conn: AsyncConnection, jti: str, expires_at: datetime) -> None:
    await conn.execute(
        """
        INSERT INTO oauth_revoked_tokens (jti, expires_at) VALUES (%s, %s)
        ON CONFLICT (jti) DO NOTHING
        """,
        (jti, expires_at),
    )


# -- browser sessions and consents -------------------------------------------


async def insert_session(
    conn: AsyncConnection, session_hash: str, user_id: int, expires_at: datetime
) -> None:
    await conn.execute(
        "INSERT INTO oauth_sessions (session_hash, user_id, expires_at) VALUES (%s, %s, %s)",
        (session_hash, user_id, expires_at),
    )


async def session_user(conn: AsyncConnection, session_hash: str) -> int | None:
    """The user of an unexpired session whose account is enabled, else None."""
    cur = await conn.execute(
        """
        SELECT s.user_id FROM oauth_sessions s JOIN users u ON u.id = s.user_id
        WHERE s.session_hash = %s AND s.expires_at > now() AND NOT u.disabled
        """,
        (session_hash,),
    )
    row = await cur.fetchone()
    return int(row[0]) if row else None


async def session_account(conn: AsyncConnection, session_hash: str) -> tuple[int, str] | None:
    """``(user id, username)`` of an unexpired session whose account is enabled, else None."""
    cur = await conn.execute(
        """
        SELECT s.user_id, u.username FROM oauth_sessions s JOIN users u ON u.id = s.user_id
        WHERE s.session_hash = %s AND s.expires_at > now() AND NOT u.disabled
        """,
        (session_hash,),
    )
    row = await cur.fetchone()
    return (int(row[0]), str(row[1])) if row else None


async def delete_session(conn: AsyncConnection, session_hash: str) -> None:
    await conn.execute("DELETE FROM oauth_sessions WHERE session_hash = %s", (session_hash,))


async def delete_user_sessions(conn: AsyncConnection, user_id: int) -> int:
    """End every browser sign-in of the user; return how many there were."""
    cur = await conn.execute("DELETE FROM oauth_sessions WHERE user_id = %s", (user_id,))
    return cur.rowcount


async def upsert_consent(conn: AsyncConnection, user_id: int, client_id: str, scope: str) -> None:
    await conn.execute(
        """
        INSERT INTO oauth_consents (user_id, client_id, scope) VALUES (%s, %s, %s)
        ON CONFLICT (user_id, client_id)
        DO UPDATE SET scope = excluded.scope, updated_at = excluded.updated_at
        """,  # excluded.updated_at: now(), the column's default (Citus refuses a function here)
        (user_id, client_id, scope),
    )


async def get_consent(conn: AsyncConnection, user_id: int, client_id: str) -> str | None:
    """The scope the user last allowed this client, or None."""
    cur = await conn.execute(
        "SELECT scope FROM oauth_consents WHERE user_id = %s AND client_id = %s",
        (user_id, client_id),
    )
    row = await cur.fetchone()
    return str(row[0]) if row else None


# -- housekeeping ---------------------------------------------------------------


async def prune_expired(conn: AsyncConnection, login_window_s: float) -> None:
    """Delete what can no longer matter: old codes, revocations, sessions, failures.

    Refresh tokens are kept until a day after they expire, so a late replay
    of a rotated-out token is still recognised as one shortly after.
    """
    await conn.execute("DELETE FROM oauth_codes WHERE expires_at < now() - interval '1 hour'")
    await conn.execute("DELETE FROM oauth_revoked_tokens WHERE expires_at < now()")
    await conn.execute("DELETE FROM oauth_grace_access_tokens WHERE access_expires_at < now()")
    await conn.execute("DELETE FROM oauth_sessions WHERE expires_at < now()")
    await conn.execute("DELETE FROM cli_tokens WHERE expires_at < now() - interval '1 day'")
    await conn.execute(
        "DELETE FROM oauth_refresh_tokens WHERE expires_at < now() - interval '1 day'"
    )
    await conn.execute(
        "DELETE FROM oauth_login_failures WHERE failed_at < now() - make_interval(secs => %s)",
        (float(login_window_s),),
    )
