-- The console's background jobs (imports, clean-up scans) and the chat-import uploads
-- waiting for their confirmation. In PostgreSQL, not in a web process's memory, so that
-- with several web processes (WEB_CONCURRENCY) the progress page, the confirm and a
-- double submit find them whichever process answers. A job's work runs in the process
-- that started it, which writes its progress here (api/console/jobs.py).
CREATE TABLE console_jobs (
    id text PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- What the page calls it: "Import", "Import from ChatGPT", "Clean-up scan".
    kind text NOT NULL,
    -- What the job is about, to find the newest of its sort (a scan: its kind and
    -- threshold); NULL: nothing looks for it but by id.
    subject text,
    state text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'done', 'failed')),
    done bigint NOT NULL DEFAULT 0,
    total bigint,
    -- Counts and outcomes for the page, never memory text.
    message text NOT NULL DEFAULT '',
    -- What the job found or did (a scan: the tool's payload).
    result jsonb NOT NULL DEFAULT '{}',
    -- A form's operation key (a double submit finds the first job), or a key held while
    -- the job runs (one scan of a kind and threshold at a time); NULL: none.
    operation_key text,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- Every progress write and a heartbeat at least every 30 s while running: a running
    -- row not updated for longer than the heartbeat window belongs to a dead process.
    updated_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
);
CREATE UNIQUE INDEX console_jobs_user_operation ON console_jobs (user_id, operation_key)
    WHERE operation_key IS NOT NULL;
CREATE INDEX console_jobs_user_subject ON console_jobs (user_id, subject, created_at DESC)
    WHERE subject IS NOT NULL;
CREATE INDEX console_jobs_finished ON console_jobs (finished_at);
CREATE INDEX console_jobs_running ON console_jobs (updated_at) WHERE state = 'running';

-- A chat export the owner uploaded, parsed, waiting (an hour at most) for "Import".
-- Only what the import reads is kept: the user's own messages, never the assistant's
-- answers or the export's attachments. Removed when its import starts.
CREATE TABLE console_uploads (
    id text PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    filename text NOT NULL,
    export jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX console_uploads_created ON console_uploads (created_at);

-- The clean-up page's "has the store changed since the last scan" signal: the newest
-- updated_at of a user's memories (every insert, edit and forget moves it; confirm and
-- feedback do not), one index entry instead of every row. Confirm and feedback, the
-- frequent updates, leave updated_at alone and so keep their HOT updates; an edit that
-- changes no other indexed column loses its HOT update.
CREATE INDEX memories_user_updated ON memories (user_id, updated_at DESC);
