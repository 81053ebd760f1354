-- The term statistics and the relation outbox are kept by the write statements
-- (issue 32; storage/terms.py, storage/outbox.py): Citus refuses to distribute a
-- table that has triggers, and a trigger on a shard could not reach the same
-- user's shard of another table anyway.
--
-- Expand, then contract. During a rolling upgrade the processes of the release
-- before this one still write, and they count through the triggers of 0002 and
-- 0005. So the triggers stay, and step aside in a transaction of this release:
-- storage.terms.lock_counts, which every such transaction calls before it writes
-- a memory, sets ownsona.terms_by_statement for the transaction. A row is then
-- counted once, by whichever code wrote it. Writes that never call it (a
-- confirmation, the extraction job's edges, a re-embedding) change no count and
-- owe nothing, here as before. A later release, once no process of the earlier
-- one can run, drops the triggers, their functions, memory_term_deltas and
-- memory_term_flush (the statements are listed in docs/scaling.md, "What needs
-- porting"); the move to Citus runs the same statements before distributing.
--
-- Safe while users write: CREATE OR REPLACE FUNCTION rewrites the catalog row
-- only (no lock on memories, nothing rebuilt); a trigger firing meanwhile runs
-- either version, both correct for a writer of the earlier release.

CREATE OR REPLACE FUNCTION memory_terms_collect() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('ownsona.terms_by_statement', true) = 'on' THEN
        RETURN NULL;  -- the statements count this transaction's rows
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO memory_term_deltas (xid, user_id, term, delta)
            SELECT pg_current_xact_id(), c.user_id, c.term, count(*)
            FROM (SELECT n.user_id, x.term
                  FROM new_rows n, unnest('{""}'::text[] || tsvector_to_array(n.text_search)) AS x(term)
                  WHERE n.deleted_at IS NULL) AS c
            GROUP BY c.user_id, c.term;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO memory_term_deltas (xid, user_id, term, delta)
            SELECT pg_current_xact_id(), c.user_id, c.term, -count(*)
            FROM (SELECT o.user_id, x.term
                  FROM old_rows o, unnest('{""}'::text[] || tsvector_to_array(o.text_search)) AS x(term)
                  WHERE o.deleted_at IS NULL) AS c
            GROUP BY c.user_id, c.term;
    ELSE
        INSERT INTO memory_term_deltas (xid, user_id, term, delta)
            SELECT pg_current_xact_id(), c.user_id, c.term, sum(c.sign)
            FROM (SELECT s.user_id, x.term, s.sign
                  FROM (SELECT o.user_id, o.text_search, -1 AS sign
                        FROM old_rows o JOIN new_rows n ON n.id = o.id
                        WHERE o.deleted_at IS NULL
                          AND (o.text_search IS DISTINCT FROM n.text_search
                               OR n.deleted_at IS NOT NULL OR o.user_id <> n.user_id)
                        UNION ALL
                        SELECT n.user_id, n.text_search, 1
                        FROM old_rows o JOIN new_rows n ON n.id = o.id
                        WHERE n.deleted_at IS NULL
                          AND (o.text_search IS DISTINCT FROM n.text_search
                               OR o.deleted_at IS NOT NULL OR o.user_id <> n.user_id)) AS s,
                       unnest('{""}'::text[] || tsvector_to_array(s.text_search)) AS x(term)) AS c
            GROUP BY c.user_id, c.term
            HAVING sum(c.sign) <> 0;
    END IF;
    IF FOUND THEN
        INSERT INTO memory_term_flush (xid) VALUES (pg_current_xact_id()) ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION relation_outbox_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('ownsona.terms_by_statement', true) = 'on' THEN
        RETURN NULL;  -- storage.outbox.owe_new
    END IF;
    INSERT INTO relation_outbox (memory_id, user_id)
    SELECT id, user_id FROM inserted WHERE deleted_at IS NULL
    ON CONFLICT (memory_id) DO NOTHING;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION relation_outbox_text_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('ownsona.terms_by_statement', true) = 'on' THEN
        RETURN NULL;  -- storage.outbox.owe_again
    END IF;
    INSERT INTO relation_outbox (memory_id, user_id) VALUES (NEW.id, NEW.user_id)
    ON CONFLICT (memory_id) DO UPDATE
        SET queued_at = now(), queued_xact = pg_current_xact_id(), due_at = NULL, attempts = 0;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION relation_outbox_edges_restored() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('ownsona.terms_by_statement', true) = 'on' THEN
        RETURN NULL;  -- storage.outbox.settle_restored
    END IF;
    DELETE FROM relation_outbox o
    USING (SELECT DISTINCT memory_id FROM added) a
    WHERE o.memory_id = a.memory_id AND o.queued_xact = pg_current_xact_id();
    RETURN NULL;
END
$$;
