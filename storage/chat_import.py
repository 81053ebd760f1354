"""Chat-import SQL: what an earlier import of the same conversations already stored.

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
