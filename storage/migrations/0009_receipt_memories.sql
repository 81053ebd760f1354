-- Write receipts name the memories their result names, in commit order, so a
-- retry-window receipt (memory/writes.py) can tell that a later write changed
-- one of them and no longer stands for the current state: "remember X",
-- "forget it", "remember X" again within the window stores X again.
ALTER TABLE write_receipts ADD COLUMN memory_ids bigint[] NOT NULL DEFAULT '{}';
ALTER TABLE write_receipts ADD COLUMN seq bigserial NOT NULL;
CREATE INDEX write_receipts_user_seq ON write_receipts (user_id, seq);
