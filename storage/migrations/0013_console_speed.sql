-- Two indexes for the console's pages at 100k memories (issue 15; BENCHMARKS.md,
-- "console pages at 100k memories").
--
-- A row of memories carries its 1.5 KB embedding inline, so 100k rows fill a ~390 MB
-- heap; a sequential scan that large goes through PostgreSQL's small ring buffer and
-- never stays cached, so each whole-store count (memory_stats, list_tags) read the
-- whole heap again: 130-250 ms a query. This index holds only what those counts read
-- (~9 MB at 100k), so they are index-only scans. It leaves out salience, use_count and
-- the confirmation times, which recall's feedback updates, so those updates stay HOT.
CREATE INDEX memories_user_counts ON memories (user_id)
    INCLUDE (created_at, deleted_at, expires_at, importance, source_provider, tags);

-- The untagged listing (list_memories untagged_only, newest first): without it the
-- planner walks memories_user_created through every row of the user's to find the few
-- untagged ones (345 ms at 100k when none is). Forgotten untagged rows are in it too, so
-- include_deleted listings use it as well; the active listing skips them on the heap.
CREATE INDEX memories_user_untagged ON memories (user_id, created_at DESC, id DESC)
    WHERE cardinality(tags) = 0;
