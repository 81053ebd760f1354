-- Which app stored each memory (issue 15: the console's memory page "Written by", the
-- apps page "memories written"), kept on the row: the audit log forgets after
-- AUDIT_RETENTION_DAYS, the row does not. Set once, by the insert that creates the row
-- (memory/remembering.py); an edit, a merge into it or a reinforcement never changes it.
-- written_by_client: the OAuth client id, or one of our own (ownsona-console,
-- ownsona-cli for a CLI token, ownsona-stdio, ownsona-cli-command). written_by_token:
-- the CLI token's jti (the apps page tells one CLI token from another by it; an OAuth
-- client's access tokens come and go, the client is the app, so it is NULL there).
-- Both NULL: not recorded (stored before this migration and not found in the audit
-- log below, restored from a backup file, or queued by a web process older than this).
ALTER TABLE memories
    ADD COLUMN written_by_client text,
    ADD COLUMN written_by_token text;

-- What the audit log still knows. The call that created a row is a successful remember
-- or remember_batch naming its id whose run spans the row's created_at (the
-- transaction's start): the record's `at` is taken when the call returned, and the call
-- began duration_ms earlier. A later call naming the same id (a merge into it, a
-- client's retry answered from the receipt) ran after created_at and is left out; the
-- 5 seconds allow for the web process's clock and the database's not agreeing exactly.
-- The stdio entry records no client id; its rows are named ownsona-stdio, as new ones
-- are (api/mcp/dispatch.py).
UPDATE memories m
SET written_by_client = w.client_id, written_by_token = w.token_jti
FROM (
    SELECT DISTINCT ON (r.id)
        r.id,
        coalesce(e.client_id, CASE WHEN e.entry = 'stdio' THEN 'ownsona-stdio' END) AS client_id,
        CASE WHEN e.client_id = 'ownsona-cli' THEN e.token_jti END AS token_jti
    FROM audit_events e
    CROSS JOIN LATERAL unnest(e.changed_ids) AS c (id)
    JOIN memories r ON r.user_id = e.user_id AND r.id = c.id
    WHERE e.ok AND e.tool IN ('remember', 'remember_batch')
      AND (e.client_id IS NOT NULL OR e.entry = 'stdio')
      AND r.created_at BETWEEN e.at - make_interval(secs => e.duration_ms / 1000.0 + 5)
                           AND e.at + interval '5 seconds'
    ORDER BY r.id, e.at, e.id
) w
WHERE m.id = w.id;

-- The apps page counts each app's rows (storage/memory_provenance.py): an index-only
-- scan of this, not a pass over the wide rows (vectors, text).
CREATE INDEX memories_user_writer ON memories (user_id, written_by_client, written_by_token)
    INCLUDE (deleted_at, expires_at);

-- "Replaces" on a memory's page: the rows whose replaced_by_id is this one.
CREATE INDEX memories_replaced_by ON memories (user_id, replaced_by_id)
    WHERE replaced_by_id IS NOT NULL;
