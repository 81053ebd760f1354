-- Sealed at rest (issue 34, docs/at-rest.md). A sealed memory keeps its text and
-- its tags as AES-GCM values under its user's data key (text_sealed, tags_sealed;
-- text is then '', tags the keyed hashes of the tags, normalized_text the keyed hash
-- of the normalized text), its lexical terms as keyed hashes (sealed_search), and
-- its length in characters (text_chars, for the length filters). A row is sealed
-- when text_sealed is not NULL: readers handle both kinds while `ownsona seal`
-- moves a store over.
--
-- Safe while users write: columns without defaults are a catalog change only. The
-- index on sealed_search is built by migration 0027, concurrently: a build here, in
-- the migration's transaction, would hold every write to memories for a scan of the
-- whole table.
ALTER TABLE memories
    ADD COLUMN text_sealed bytea,
    ADD COLUMN tags_sealed bytea,
    ADD COLUMN sealed_search tsvector,
    ADD COLUMN text_chars integer;
ALTER TABLE memories ALTER COLUMN sealed_search SET STORAGE MAIN;
