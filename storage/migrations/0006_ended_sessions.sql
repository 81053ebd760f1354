-- Mcp-Session-Id values ended with DELETE /mcp (api/mcp/resource.py). Every web
-- process, and every later start, must refuse them, so they live here rather
-- than in one process's memory. A session id carries its signed issue time and
-- is refused once older than the session lifetime (30 days): a row older than
-- that guards nothing and is pruned (by the next DELETE, see storage/sessions.py).
CREATE TABLE mcp_ended_sessions (
    session_key text PRIMARY KEY,
    user_id     bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    ended_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX mcp_ended_sessions_ended_at ON mcp_ended_sessions (ended_at);
