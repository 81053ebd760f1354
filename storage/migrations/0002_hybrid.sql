-- Hybrid recall (SUPPLEMENT §4 plus the hybrid-retrieval issue): a full-text
-- index beside the HNSW index, and per-user term statistics so that lexical
-- matches are weighted by how rare each word is in that user's store (IDF).
--
-- Text search configuration: 'english' (Snowball stemming, English stop
-- words). Stemming lets "lives" match "live" and "hiking" match "hike"; on the
-- LoCoMo dev set it is worth +0.06 recall@10 for the lexical ranking alone
-- over 'simple'. Text in other languages still matches word for word: the same
-- configuration reduces the stored text and the query, so an exact word always
-- meets itself; only the English-specific merging of word forms is missing.

-- Row layout. The new column makes most rows wider than the 2 kB at which
-- PostgreSQL starts compressing values and moving them out of line (TOAST).
-- Left so, the vectors (the widest values) go out of line and the tsvectors
-- get compressed: every candidate's cosine then costs a TOAST lookup and every
-- term test a decompression. A memory of a few hundred characters is about
-- 2.5 kB with its vector, so rows stay untouched up to 4 kB, and in longer
-- rows the text columns give way first: vectors and tsvector are MAIN (kept
-- in the row unless nothing else helps, so any dimension still fits). Set
-- before the column is added, so the rewrite that adding it causes applies it.
ALTER TABLE memories SET (toast_tuple_target = 4096);
ALTER TABLE memories ALTER COLUMN embedding SET STORAGE MAIN,
                     ALTER COLUMN context_centroid SET STORAGE MAIN;

ALTER TABLE memories ADD COLUMN text_search tsvector
    GENERATED ALWAYS AS (to_tsvector('english'::regconfig, text)) STORED;
ALTER TABLE memories ALTER COLUMN text_search SET STORAGE MAIN;
-- With user_id in the index (btree_gin), a user's lexical probe reads only that
-- user's rows, however many other users share its words.
CREATE EXTENSION IF NOT EXISTS btree_gin;
CREATE INDEX memories_user_text_search ON memories USING gin (user_id, text_search);

-- How many of the user's counted rows (not soft-deleted; expiry is a matter of
-- time and is not tracked) contain each term, and how many rows there are.
-- A term no row contains has no entry: nothing of a hard-deleted memory stays.
CREATE TABLE memory_term_totals (
    user_id bigint PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    docs    integer NOT NULL
);
CREATE TABLE memory_terms (
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    term    text NOT NULL,
    docs    integer NOT NULL,
    PRIMARY KEY (user_id, term)
);

-- Keeping the counts. Each statement on memories adds up what it changed, per
-- user and term, into memory_term_deltas (a plain insert: it locks nothing
-- another writer needs) and marks its transaction in memory_term_flush. The
-- mark fires a deferred trigger once, at commit, which folds the transaction's
-- deltas into the counts. Folding at commit means it runs after the
-- transaction has taken every other lock it will take, and it writes each
-- user's totals row first, then the terms in sorted order, so two commits of
-- one user wait for each other instead of deadlocking. Both work tables are
-- emptied before each commit (a transaction only ever sees its own rows in
-- them), so they are unlogged: a crash loses nothing.
CREATE UNLOGGED TABLE memory_term_deltas (
    xid     xid8 NOT NULL,
    user_id bigint NOT NULL,
    term    text NOT NULL,  -- '' counts rows
    delta   integer NOT NULL
);
CREATE INDEX memory_term_deltas_xid ON memory_term_deltas (xid);
CREATE UNLOGGED TABLE memory_term_flush (
    xid xid8 PRIMARY KEY
);

CREATE FUNCTION memory_terms_collect() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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
        -- Only rows whose words or counted state changed (not salience, confirmations ...).
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

CREATE FUNCTION memory_terms_flush() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_term_totals AS t (user_id, docs)
        SELECT d.user_id, sum(d.delta)
        FROM memory_term_deltas d
        WHERE d.xid = NEW.xid AND d.term = ''
          AND EXISTS (SELECT 1 FROM users u WHERE u.id = d.user_id)  -- not deleted meanwhile
        GROUP BY d.user_id
        ORDER BY d.user_id
        ON CONFLICT (user_id) DO UPDATE SET docs = t.docs + excluded.docs;
    INSERT INTO memory_terms AS t (user_id, term, docs)
        SELECT d.user_id, d.term, sum(d.delta)
        FROM memory_term_deltas d
        WHERE d.xid = NEW.xid AND d.term <> ''
          AND EXISTS (SELECT 1 FROM users u WHERE u.id = d.user_id)
        GROUP BY d.user_id, d.term
        HAVING sum(d.delta) <> 0
        ORDER BY d.user_id, d.term
        ON CONFLICT (user_id, term) DO UPDATE SET docs = t.docs + excluded.docs;
    DELETE FROM memory_terms t
        USING (SELECT DISTINCT user_id, term FROM memory_term_deltas
               WHERE xid = NEW.xid AND term <> '') AS d
        WHERE t.user_id = d.user_id AND t.term = d.term AND t.docs <= 0;
    DELETE FROM memory_term_deltas WHERE xid = NEW.xid;
    DELETE FROM memory_term_flush WHERE xid = NEW.xid;
    RETURN NULL;
END
$$;

CREATE TRIGGER memories_terms_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memory_terms_collect();
CREATE TRIGGER memories_terms_update AFTER UPDATE ON memories
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memory_terms_collect();
CREATE TRIGGER memories_terms_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memory_terms_collect();
CREATE CONSTRAINT TRIGGER memory_term_flush_at_commit AFTER INSERT ON memory_term_flush
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION memory_terms_flush();

INSERT INTO memory_term_totals (user_id, docs)
    SELECT user_id, count(*) FROM memories WHERE deleted_at IS NULL GROUP BY user_id;
INSERT INTO memory_terms (user_id, term, docs)
    SELECT m.user_id, x.term, count(*)
    FROM memories m, unnest(tsvector_to_array(m.text_search)) AS x(term)
    WHERE m.deleted_at IS NULL
    GROUP BY m.user_id, x.term;
