-- Event time (issue 17): when a memory's fact happened (occurred_at) and the span it holds
-- for (valid_from .. valid_to), beside when it was stored (created_at). All optional.
-- occurred_at_parsed: occurred_at was read from the text (no caller gave it), so a later
-- change of the text reads it again; a value the caller gave is never overwritten so.
ALTER TABLE memories
    ADD COLUMN occurred_at timestamptz,
    ADD COLUMN valid_from timestamptz,
    ADD COLUMN valid_to timestamptz,
    ADD COLUMN occurred_at_parsed boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT memories_valid_span CHECK (valid_from <= valid_to),
    ADD CONSTRAINT memories_parsed_has_time CHECK (NOT occurred_at_parsed OR occurred_at IS NOT NULL);

-- Filtering one user's memories by time (what happened when; what held at an instant).
-- Partial: most memories carry no event time, and those rows stay out of both.
CREATE INDEX memories_user_occurred ON memories (user_id, occurred_at)
    WHERE occurred_at IS NOT NULL;
CREATE INDEX memories_user_valid ON memories (user_id, valid_from, valid_to)
    WHERE valid_from IS NOT NULL OR valid_to IS NOT NULL;
