-- The size of what a user's HNSW scan walks, for the exact-or-index choice
-- (storage.memory_sql.TABLE_ROWS, SMALL_USER; issue 32). On one node it is the
-- table's row estimate (pg_class.reltuples of memories, kept by autovacuum's
-- ANALYZE; -1 before the first), the value the statements read inline before (the
-- same number, so the same choice; a call of a few microseconds more). On Citus,
-- storage.citus_layout replaces the body with the estimate of the user's shard of
-- memories, read on the worker that runs the statement: a catalog read on the
-- coordinator would take the statement out of Citus's router planner, and the
-- coordinator's estimate of a distributed table says nothing about one shard.
--
-- Safe while users write: a new function, which nothing of the release before calls.
CREATE OR REPLACE FUNCTION ownsona_memories_rows(owner bigint) RETURNS real
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT c.reltuples FROM pg_class c WHERE c.oid = 'memories'::regclass $$;
