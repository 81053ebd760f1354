-- Accounts the owner can end at once (issue 12).

-- Access tokens whose iat is before this instant are refused: set by a password
-- change and by `ownsona token revoke --all`, so one write ends every token the
-- account holds without listing them. NULL: no such cut-off.
ALTER TABLE users ADD COLUMN tokens_valid_after timestamptz;
-- The last successful password sign-in on the OAuth login page.
ALTER TABLE users ADD COLUMN last_sign_in_at timestamptz;

-- Access tokens minted by `ownsona token`, so the operator can list and revoke
-- them. OAuth-issued ones are found through their grant (oauth_refresh_tokens).
CREATE TABLE cli_tokens (
    id            bigserial PRIMARY KEY,
    jti           text NOT NULL UNIQUE,
    user_id       bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    label         text,
    scope         text NOT NULL,
    issued_at     timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    -- Refreshed at most once a minute by the bearer check (no write per request).
    last_used_at  timestamptz,
    revoked_at    timestamptz
);
CREATE INDEX cli_tokens_user ON cli_tokens (user_id);
CREATE INDEX cli_tokens_expires ON cli_tokens (expires_at);

-- When an OAuth grant's access tokens were last presented (same once-a-minute rule).
ALTER TABLE oauth_grants ADD COLUMN last_used_at timestamptz;
-- The bearer check finds an OAuth access token's grant by its jti.
CREATE INDEX oauth_refresh_tokens_access_jti ON oauth_refresh_tokens (access_jti);
