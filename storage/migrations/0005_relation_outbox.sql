-- Relation extraction owed, one row per memory: a transactional outbox
-- (SUPPLEMENT §6). Triggers on memories write the row in the same transaction
-- as the text, whichever path stores it (remember, remember_batch,
-- update_memory(_batch), import): a crash or an unreachable broker after the
-- commit cannot lose the job. The row goes away in the transaction that
-- stores the memory's extracted edges, or with the memory (hard forget, user
-- delete: ON DELETE CASCADE).
CREATE TABLE relation_outbox (
    memory_id   bigint PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
    -- No foreign key of its own: the memory's cascade from users covers it.
    user_id     bigint NOT NULL,
    -- When the text was stored, and by which transaction (see the edges trigger).
    queued_at   timestamptz NOT NULL DEFAULT now(),
    queued_xact xid8 NOT NULL DEFAULT pg_current_xact_id(),
    -- NULL: the write's own post-commit relay sends it; the sweep steps in only
    -- once it is older than a grace period. Set: the sweep sends it at that time
    -- (now, when the relay could not reach the broker; later, with back-off,
    -- after each sweep that sent it).
    due_at      timestamptz,
    -- Sends by the sweep so far (the back-off doubles with each).
    attempts    integer NOT NULL DEFAULT 0
);
CREATE INDEX relation_outbox_relayed ON relation_outbox (queued_at) WHERE due_at IS NULL;
CREATE INDEX relation_outbox_due ON relation_outbox (due_at) WHERE due_at IS NOT NULL;

-- New rows: one statement for a whole batch (remember_batch inserts 200 rows at once).
CREATE FUNCTION relation_outbox_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO relation_outbox (memory_id, user_id)
    SELECT id, user_id FROM inserted WHERE deleted_at IS NULL
    ON CONFLICT (memory_id) DO NOTHING;
    RETURN NULL;
END
$$;
CREATE TRIGGER memories_relation_outbox_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION relation_outbox_inserted();

-- Changed text (only then: re-embedding, confirming and forgetting leave the
-- text alone and never fire this). A change while a job is pending starts the
-- entry over.
CREATE FUNCTION relation_outbox_text_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO relation_outbox (memory_id, user_id) VALUES (NEW.id, NEW.user_id)
    ON CONFLICT (memory_id) DO UPDATE
        SET queued_at = now(), queued_xact = pg_current_xact_id(), due_at = NULL, attempts = 0;
    RETURN NULL;
END
$$;
CREATE TRIGGER memories_relation_outbox_text AFTER UPDATE OF text ON memories
    FOR EACH ROW WHEN (OLD.text IS DISTINCT FROM NEW.text AND NEW.deleted_at IS NULL)
    EXECUTE FUNCTION relation_outbox_text_changed();

-- Edges written by the transaction that stored the memory's text (an import
-- restores a memory together with its edges) are that text's edges: nothing is
-- owed. The extraction job writes edges in a transaction of its own, so its
-- entries are never touched here; it deletes them itself.
CREATE FUNCTION relation_outbox_edges_restored() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM relation_outbox o
    USING (SELECT DISTINCT memory_id FROM added) a
    WHERE o.memory_id = a.memory_id AND o.queued_xact = pg_current_xact_id();
    RETURN NULL;
END
$$;
CREATE TRIGGER memory_relations_outbox AFTER INSERT ON memory_relations
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION relation_outbox_edges_restored();

-- Memories stored before this migration have had their extraction already
-- (or lost it for good); `ownsona relations rebuild` redoes them all.
