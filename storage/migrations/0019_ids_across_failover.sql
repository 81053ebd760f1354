-- lock first: every table
-- (storage/migrate.py: this migration changes the default of a column of nearly every table in
-- one transaction; taking them all first, in name order, is what keeps it from deadlocking with
-- users' writes, which touch several of them.)
-- Ids are never reused, failover included (issue 29; mcp-tools.texi, "Memory ID": "never
-- reused"). With asynchronous replication a promoted standby has not seen the last writes
-- of the old primary, nor how far its sequences had gone: nextval() would hand out again ids
-- that acknowledged (then lost) writes already returned.
--
-- Every id column now takes ownsona_next_id(seq) instead of nextval(seq). It compares the
-- timeline this server writes on (a promotion, or a point-in-time restore, always starts a
-- new one) with the one recorded in store_meta ('id_timeline'). The first write on a new
-- timeline moves every sequence of the schema to at least timeline << 40, and at least 2^32
-- past where it was: each timeline gets its own block of 2^40 ids, which no write of an
-- earlier timeline can have reached (whatever this server missed of it), and which the
-- JSON-number limit of clients (2^53) leaves room for 8191 timelines. No clock is involved,
-- so clock skew between the old and the new primary cannot make two writes share an id.
--
-- The check costs one session variable read per row; the store_meta row is locked only by
-- the first write of a new timeline.

CREATE FUNCTION ownsona_timeline() RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    -- The first 8 hex digits of the WAL file name are the timeline being written.
    SELECT ('x' || substr(pg_walfile_name(pg_current_wal_insert_lsn()), 1, 8))::bit(32)::bigint
$$;

CREATE FUNCTION ownsona_enter_timeline(tli bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    seen bigint;
    seq record;
BEGIN
    SELECT value::bigint INTO seen FROM store_meta WHERE key = 'id_timeline' FOR UPDATE;
    IF seen IS NOT DISTINCT FROM tli THEN
        RETURN;  -- recorded already (by another session that got here first)
    END IF;
    IF seen IS NOT NULL THEN
        FOR seq IN
            SELECT format('%I.%I', schemaname, sequencename) AS name, last_value
            FROM pg_sequences WHERE schemaname = current_schema()
        LOOP
            PERFORM setval(seq.name, greatest(coalesce(seq.last_value, 0) + 4294967296, tli << 40));
        END LOOP;
        RAISE LOG 'ownsona: first write on timeline % (ids were on timeline %): sequences moved to its block', tli, seen;
    END IF;
    INSERT INTO store_meta (key, value) VALUES ('id_timeline', tli::text)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value;
END
$$;

CREATE FUNCTION ownsona_next_id(seq regclass) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    tli bigint := ownsona_timeline();
BEGIN
    -- Session cache: set only once this session has seen its timeline recorded; a rolled
    -- back transaction rolls it back too.
    IF current_setting('ownsona.id_timeline', true) IS DISTINCT FROM tli::text THEN
        PERFORM ownsona_enter_timeline(tli);
        PERFORM set_config('ownsona.id_timeline', tli::text, false);
    END IF;
    RETURN nextval(seq);
END
$$;

INSERT INTO store_meta (key, value) VALUES ('id_timeline', ownsona_timeline()::text)
ON CONFLICT (key) DO UPDATE SET value = excluded.value;

-- Every column whose default draws from a sequence it owns (bigserial): the memories,
-- relations, users, tokens, OAuth rows, audit records, receipts.
DO $$
DECLARE
    col record;
BEGIN
    FOR col IN
        SELECT c.oid::regclass AS tbl, a.attname AS name,
               pg_get_serial_sequence(c.oid::regclass::text, a.attname) AS seq
        FROM pg_class c
        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
    LOOP
        IF col.seq IS NOT NULL THEN
            EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT ownsona_next_id(%L::regclass)',
                           col.tbl, col.name, col.seq);
        END IF;
    END LOOP;
END
$$;
