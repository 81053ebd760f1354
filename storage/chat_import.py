"""Chat-import SQL: what an earlier import of the same conversations already stored or read.

Every function takes a connection so the caller owns the transaction.
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import AsyncConnection


async def imported_texts(
    conn: AsyncConnection, user_id: int, source_provider: str, session_ids: Sequence[str]
) -> dict[str, set[str]]:
    """Per conversation (session id): the normalized texts stored with this provenance.

    Forgotten rows count too, so importing a file again never brings back what
    the owner forgot since.
    """
    if not session_ids:
        return {}
    cur = await conn.execute(
        "SELECT session_id, normalized_text FROM memories"
        " WHERE user_id = %s AND source_provider = %s AND session_id = ANY(%s::text[])",
        (user_id, source_provider, list(session_ids)),
    )
    found: dict[str, set[str]] = {}
    for session_id, text in await cur.fetchall():
        found.setdefault(session_id, set()).add(text)
    return found


async def extracted_conversations(
    conn: AsyncConnection, user_id: int, source_provider: str, session_ids: Sequence[str]
) -> set[str]:
    """The conversations (session ids) whose facts an earlier import stored in full."""
    if not session_ids:
        return set()
    cur = await conn.execute(
        "SELECT session_id FROM chat_import_extracted"
        " WHERE user_id = %s AND source_provider = %s AND session_id = ANY(%s::text[])",
        (user_id, source_provider, list(session_ids)),
    )
    return {row[0] for row in await cur.fetchall()}


async def mark_extracted(
    conn: AsyncConnection, user_id: int, source_provider: str, session_id: str
) -> None:
    await conn.execute(
        "INSERT INTO chat_import_extracted (user_id, source_provider, session_id)"
        " VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
        (user_id, source_provider, session_id),
    )
