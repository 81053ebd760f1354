-- Client ID Metadata Documents (auth/client_documents.py): a client whose client_id
-- is an https URL is described by the JSON document at that URL, not registered. It
-- still gets a row in oauth_clients, so codes, grants and consents keep their
-- foreign keys: the row is a copy of the document, rewritten on every fetch.
-- document_fetched_at marks such a row (NULL for registered clients) and says when
-- the copy was last refreshed; a registered row is never overwritten by a document.
ALTER TABLE oauth_clients ADD COLUMN document_fetched_at timestamptz;

-- The jti of every private_key_jwt client assertion accepted at the token or
-- revocation endpoint (RFC 7523 §3 item 7), kept until the assertion expires so
-- that no web process accepts it twice.
CREATE TABLE oauth_client_assertions (
    client_id   text NOT NULL,
    jti         text NOT NULL,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (client_id, jti)
);
CREATE INDEX oauth_client_assertions_expires ON oauth_client_assertions (expires_at);
