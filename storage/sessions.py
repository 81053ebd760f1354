"""Ended MCP sessions: the ids DELETE /mcp ended, shared by every web process.

Open sessions are not stored (their ids are signed, see api/mcp/resource.py);
only the ended ones are, until their ids are too old to be accepted anyway.
Every function takes a connection so the caller owns the transaction.
"""

from __future__ import annotations

from psycopg import AsyncConnection

# The primary key alone: the check runs for every request that carries a session id.
_IS_ENDED = "SELECT 1 FROM mcp_ended_sessions WHERE session_key = %s"

# One statement: the prune rides on the (rare) DELETE /mcp, through the ended_at
# index, so the table holds only ids young enough to be presented.
_END = """
WITH pruned AS (
    DELETE FROM mcp_ended_sessions WHERE ended_at < now() - make_interval(secs => %(keep_s)s)
)
INSERT INTO mcp_ended_sessions (session_key, user_id) VALUES (%(key)s, %(user_id)s)
ON CONFLICT (session_key) DO NOTHING
RETURNING 1
"""


async def is_ended(conn: AsyncConnection, session_key: str) -> bool:
    """Whether the session was ended (by any process, at any time still remembered)."""
    row = await (await conn.execute(_IS_ENDED, (session_key,))).fetchone()
    return row is not None


async def end(conn: AsyncConnection, session_key: str, user_id: int, *, keep_s: float) -> bool:
    """Record the session as ended; False when it already was (a second DELETE, or a race).

    Entries older than ``keep_s`` seconds are pruned on the way.
    """
    cur = await conn.execute(_END, {"key": session_key, "user_id": user_id, "keep_s": keep_s})
    return await cur.fetchone() is not None
