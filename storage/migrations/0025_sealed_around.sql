-- lock first: audit_events, console_uploads, write_receipts
-- Sealed at rest, what sits around the memories (issue 34, docs/at-rest.md): a write's
-- stored answer, a chat export waiting to be imported and a recorded recall query are
-- sealed under their user's data key when sealing is on. A sealed row keeps the
-- value in the *_sealed column and a placeholder in the plain one ('{}', ''), so the
-- NOT NULL columns stay as they are and rows written before sealing read as before.
--
-- Expand only, safe while users write: nullable columns without defaults are a
-- catalog change; the three tables' locks are taken together first (storage/migrate.py).
ALTER TABLE write_receipts ADD COLUMN result_sealed bytea;
ALTER TABLE console_uploads
    ADD COLUMN filename_sealed bytea,
    ADD COLUMN export_sealed bytea;
ALTER TABLE audit_events ADD COLUMN query_sealed bytea;
