"""SQL of metadata-document clients and of used client assertions (migration 0007).

A client ID metadata document's client is a row of ``oauth_clients`` marked by
``document_fetched_at``; :func:`upsert_document_client` rewrites it from the
latest fetch and never touches a registered client's row. Used
``private_key_jwt`` assertion ids are kept until the assertion expires.
"""

from __future__ import annotations

from datetime import datetime

from psycopg import AsyncConnection, sql
from psycopg.rows import class_row

from .oauth import CLIENT_COLUMNS, CLIENT_INSERT_COLUMNS, ClientRow, NewClient, client_values


async def upsert_document_client(conn: AsyncConnection, client: NewClient) -> ClientRow | None:
    """The client's row, written from its document; None when ``client_id`` is a registered client."""
    async with conn.cursor(row_factory=class_row(ClientRow)) as cur:
        await cur.execute(
            sql.SQL(
                """
            INSERT INTO oauth_clients ({columns}, document_fetched_at)
            VALUES (%s, NULL, %s, %s, %s, %s, %s, %s, %s, %s, now())
            ON CONFLICT (client_id) DO UPDATE SET
                client_name = excluded.client_name,
                redirect_uris = excluded.redirect_uris,
                grant_types = excluded.grant_types,
                response_types = excluded.response_types,
                scope = excluded.scope,
                token_endpoint_auth_method = excluded.token_endpoint_auth_method,
                application_type = excluded.application_type,
                metadata = excluded.metadata,
                document_fetched_at = excluded.document_fetched_at
            WHERE oauth_clients.document_fetched_at IS NOT NULL
            RETURNING {returned}
            """
            ).format(columns=CLIENT_INSERT_COLUMNS, returned=CLIENT_COLUMNS),
            (client.client_id, *client_values(client)),
        )
        return await cur.fetchone()


async def record_assertion(
    conn: AsyncConnection, client_id: str, jti: str, expires_at: datetime
) -> bool:
    """Record a used assertion id; False when this client used it before (a replay).

    Expired ids are deleted first: an assertion past its ``exp`` is refused
    anyway, so its id need not be remembered.
    """
    await conn.execute("DELETE FROM oauth_client_assertions WHERE expires_at < now()")
    cur = await conn.execute(
        """
        INSERT INTO oauth_client_assertions (client_id, jti, expires_at) VALUES (%s, %s, %s)
        ON CONFLICT (client_id, jti) DO NOTHING
        """,
        (client_id, jti, expires_at),
    )
    return cur.rowcount == 1
