-- The refresh-token grace window (OAUTH_REFRESH_GRACE_SECONDS, auth/grants.py).
-- A client that refreshes in parallel, or retries a refresh whose answer it
-- lost, presents the same refresh token twice. Within the window the second
-- request is answered with the family's live refresh token rather than
-- revoking the family; to hand out that token again without keeping it in
-- the clear, each token's successor is kept sealed (AES-256-GCM) under a key
-- derived from the predecessor's own value, which only its holder has (the
-- table keeps only the SHA-256 of that value).
ALTER TABLE oauth_refresh_tokens
    ADD COLUMN successor_hash   text,
    ADD COLUMN successor_sealed bytea;

-- Access tokens issued on a replay within the window (the refresh token row
-- keeps only the access token issued with it): revoking the family
-- deny-lists these too.
CREATE TABLE oauth_grace_access_tokens (
    jti               text PRIMARY KEY,
    grant_id          bigint NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
    access_expires_at timestamptz NOT NULL
);
CREATE INDEX oauth_grace_access_tokens_grant ON oauth_grace_access_tokens (grant_id);
CREATE INDEX oauth_grace_access_tokens_expires ON oauth_grace_access_tokens (access_expires_at);
