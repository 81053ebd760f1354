-- concurrently: memories_user_sealed_search
-- The lexical index of sealed rows (issue 34, migration 0023's columns), built with
-- CREATE INDEX CONCURRENTLY outside a transaction (storage/migrate.py): reads and
-- writes go on while it scans the table. A database that already has it (0023 built
-- it before it moved here) keeps it: IF NOT EXISTS.
CREATE INDEX CONCURRENTLY IF NOT EXISTS memories_user_sealed_search
    ON memories USING gin (user_id, sealed_search)
    WHERE sealed_search IS NOT NULL
