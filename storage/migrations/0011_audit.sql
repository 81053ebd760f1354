-- The audit log of tool calls (issue 15, /console/activity): when, which entry point and
-- app, which tool, which memories it read or changed, and its outcome. Never memory
-- text; a read's query text only with AUDIT_RECORD_QUERIES. Pruned daily after
-- AUDIT_RETENTION_DAYS (memory/audit.py).
CREATE TABLE audit_events (
    id bigserial PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    at timestamptz NOT NULL DEFAULT now(),
    -- mcp (HTTP), stdio, console or cli.
    entry text NOT NULL,
    -- The OAuth client id, ownsona-cli (a CLI token) or ownsona-console; NULL: none.
    client_id text,
    -- The access token's jti: tells one CLI token from another.
    token_jti text,
    tool text NOT NULL,
    ok boolean NOT NULL,
    error_code text,
    read_ids bigint[] NOT NULL DEFAULT '{}',
    changed_ids bigint[] NOT NULL DEFAULT '{}',
    query text,
    duration_ms real NOT NULL DEFAULT 0
);
CREATE INDEX audit_events_user_at ON audit_events (user_id, at DESC, id DESC);
CREATE INDEX audit_events_user_client_at ON audit_events (user_id, client_id, at DESC);
CREATE INDEX audit_events_changed ON audit_events USING gin (changed_ids);
CREATE INDEX audit_events_at ON audit_events (at);
