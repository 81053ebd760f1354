-- OAuth 2.1 authorization server state (SUPPLEMENT §8). Secrets (client
-- secrets, codes, refresh tokens, browser sessions) are stored only as
-- SHA-256 hashes: they are 256-bit random values, so a fast hash suffices.

-- Clients, registered dynamically (RFC 7591) or by an operator.
CREATE TABLE oauth_clients (
    client_id                  text PRIMARY KEY,
    -- NULL for public clients (token_endpoint_auth_method = 'none').
    client_secret_hash         text,
    client_name                text,
    redirect_uris              text[] NOT NULL,
    grant_types                text[] NOT NULL,
    response_types             text[] NOT NULL,
    scope                      text NOT NULL,
    token_endpoint_auth_method text NOT NULL,
    application_type           text,
    -- The client metadata as registered and echoed back (RFC 7591 §3.2.1).
    metadata                   jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at                 timestamptz NOT NULL DEFAULT now()
);

-- Refresh-token families: everything issued from one authorization code.
-- Presenting a rotated-out token revokes the family (OAuth 2.1 §4.3.1).
CREATE TABLE oauth_grants (
    id              bigserial PRIMARY KEY,
    client_id       text NOT NULL REFERENCES oauth_clients (client_id) ON DELETE CASCADE,
    user_id         bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    scope           text NOT NULL,
    resource        text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    revoked_at      timestamptz,
    revoked_reason  text
);
CREATE INDEX oauth_grants_user ON oauth_grants (user_id);

-- Authorization codes: single use, 60 s (SUPPLEMENT §8).
CREATE TABLE oauth_codes (
    code_hash       text PRIMARY KEY,
    client_id       text NOT NULL REFERENCES oauth_clients (client_id) ON DELETE CASCADE,
    user_id         bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    redirect_uri    text NOT NULL,
    code_challenge  text NOT NULL,
    scope           text NOT NULL,
    resource        text NOT NULL,
    expires_at      timestamptz NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- Set on the first redemption attempt; a second attempt is a replay.
    used_at         timestamptz,
    -- The grant the redemption created, revoked if the code is replayed.
    grant_id        bigint REFERENCES oauth_grants (id) ON DELETE SET NULL
);
CREATE INDEX oauth_codes_expires ON oauth_codes (expires_at);

-- One row per refresh token issued; the access token issued with it is
-- recorded so that revoking the family can deny-list it too.
CREATE TABLE oauth_refresh_tokens (
    token_hash        text PRIMARY KEY,
    grant_id          bigint NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
    created_at        timestamptz NOT NULL DEFAULT now(),
    expires_at        timestamptz NOT NULL,
    -- Set when the token is exchanged for its successor.
    rotated_at        timestamptz,
    access_jti        text NOT NULL,
    access_expires_at timestamptz NOT NULL
);
CREATE INDEX oauth_refresh_tokens_grant ON oauth_refresh_tokens (grant_id);
CREATE INDEX oauth_refresh_tokens_expires ON oauth_refresh_tokens (expires_at);

-- Revoked access tokens, by jti, until they expire anyway (RFC 7009).
CREATE TABLE oauth_revoked_tokens (
    jti         text PRIMARY KEY,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX oauth_revoked_tokens_expires ON oauth_revoked_tokens (expires_at);

-- Logged-in browser sessions on the authorization pages.
CREATE TABLE oauth_sessions (
    session_hash  text PRIMARY KEY,
    user_id       bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL
);
CREATE INDEX oauth_sessions_expires ON oauth_sessions (expires_at);

-- What a user allowed a client, so a known client is not asked again.
CREATE TABLE oauth_consents (
    user_id     bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    client_id   text NOT NULL REFERENCES oauth_clients (client_id) ON DELETE CASCADE,
    scope       text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, client_id)
);

-- Failed sign-ins, for throttling per username and per client address.
-- Unknown usernames are recorded too, so throttling reveals nothing.
CREATE TABLE oauth_login_failures (
    id          bigserial PRIMARY KEY,
    username    text NOT NULL,
    address     text NOT NULL,
    failed_at   timestamptz NOT NULL
);
CREATE INDEX oauth_login_failures_username ON oauth_login_failures (username, failed_at);
CREATE INDEX oauth_login_failures_address ON oauth_login_failures (address, failed_at);
