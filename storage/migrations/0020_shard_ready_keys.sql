-- lock first: memories, memory_relations, relation_outbox, memory_downweights
-- (storage/migrate.py: four tables users write, altered in one transaction.)
-- Shard-ready foreign keys (issue 29, docs/scaling.md "Sharding by user on Citus").
-- A key between two user-owned tables names user_id on both sides: a relation, an
-- outbox entry or a downweight can then only point at a memory of the same user
-- (today nothing in the schema stopped a row of one user naming another user's
-- memory), and Citus accepts the key once both tables are distributed by user_id
-- (it refuses a key between distributed tables that leaves the distribution column out).
-- The new unique key (user_id, id) is the one the keys point at; id stays unique by itself
-- (the primary key) until a move to Citus, which makes (user_id, id) the primary key.
ALTER TABLE memories ADD CONSTRAINT memories_user_id_id_key UNIQUE (user_id, id);

ALTER TABLE memory_relations
    DROP CONSTRAINT memory_relations_memory_id_fkey,
    ADD CONSTRAINT memory_relations_memory_fkey FOREIGN KEY (user_id, memory_id)
        REFERENCES memories (user_id, id) ON DELETE CASCADE;

ALTER TABLE relation_outbox
    DROP CONSTRAINT relation_outbox_memory_id_fkey,
    ADD CONSTRAINT relation_outbox_memory_fkey FOREIGN KEY (user_id, memory_id)
        REFERENCES memories (user_id, id) ON DELETE CASCADE;

ALTER TABLE memory_downweights
    DROP CONSTRAINT memory_downweights_memory_id_fkey,
    DROP CONSTRAINT memory_downweights_by_memory_id_fkey,
    ADD CONSTRAINT memory_downweights_memory_fkey FOREIGN KEY (user_id, memory_id)
        REFERENCES memories (user_id, id) ON DELETE CASCADE,
    ADD CONSTRAINT memory_downweights_by_memory_fkey FOREIGN KEY (user_id, by_memory_id)
        REFERENCES memories (user_id, id) ON DELETE CASCADE;
