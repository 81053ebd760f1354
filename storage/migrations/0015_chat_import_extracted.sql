-- The conversations a chat import has finished extracting facts from (issue 15). Importing
-- the same export again sends only the others to the LLM: a conversation whose facts were
-- stored in part (a batch failed midway) is extracted again, its stored facts skipped.
CREATE TABLE chat_import_extracted (
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    source_provider text NOT NULL,
    session_id text NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, source_provider, session_id)
);

-- Before this table an import skipped any conversation that had given memories; those
-- count as finished, as they did then.
INSERT INTO chat_import_extracted (user_id, source_provider, session_id)
SELECT DISTINCT user_id, source_provider, session_id
FROM memories
WHERE source_provider IN ('chatgpt-import', 'claude-import')
  AND capture_mode = 'inferred'
  AND session_id IS NOT NULL;
