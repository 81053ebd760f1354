-- lock first: memories, memory_relations
-- (storage/migrate.py: two tables users write, altered in one transaction.)
-- Sealed at rest, what 0023 left plain (issue 34, docs/at-rest.md). A memory's
-- metadata and forget reason get AES-GCM columns beside the plain ones (the plain
-- one is then '{}' or NULL); a relation's subject, predicate and object are sealed
-- for display, and the plain columns hold the keyed hashes of the lowercase phrases
-- (hex, so the lower(subject) and lower(object) indexes serve sealed rows as they
-- are), with predicate_prefixes the keyed hashes of the predicate's prefixes that
-- end at a space (the functional patterns' "favorite %"). A value is sealed when
-- its *_sealed column is not NULL; plain rows read as before while `ownsona seal`
-- moves a store over.
--
-- Expand only: nullable columns without defaults are a catalog change (no rewrite,
-- no scan); the locks are held for that change alone.
ALTER TABLE memories
    ADD COLUMN metadata_sealed bytea,
    ADD COLUMN forget_reason_sealed bytea;
ALTER TABLE memory_relations
    ADD COLUMN subject_sealed bytea,
    ADD COLUMN predicate_sealed bytea,
    ADD COLUMN object_sealed bytea,
    ADD COLUMN predicate_prefixes text[];
