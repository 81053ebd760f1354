-- Sealed rows' keyed terms go straight into their GIN index, not through a pending list
-- (issue 34; docs/at-rest.md, "Search over sealed rows"). With GIN's default
-- fastupdate, new entries wait in a pending list that every search of the index reads
-- whole until a vacuum merges it. A keyed term (22 characters) is several times a
-- lexeme's size, so the same rows made a pending list several times the plain index's:
-- at 3,000 sealed rows, 131 pages against 21, and recall's lexical statement read 899
-- buffers a call against 298 for the same rows plain (50 recalls, the benchmark's
-- corpus). Without it, 288: as plain. A write adds its entries to the index itself
-- (some more WAL per sealed row); the plain index keeps its pending list.
--
-- Safe while users write: a catalog change under a brief lock of the index; the
-- entries already pending are merged now (on Citus the coordinator's index is empty,
-- and each shard's is merged by its next vacuum).
ALTER INDEX memories_user_sealed_search SET (fastupdate = off);
SELECT gin_clean_pending_list('memories_user_sealed_search'::regclass);
