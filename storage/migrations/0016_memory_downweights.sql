-- Which newer memory downweighted which (issue 15: the console's memory page shows what
-- supersedes or downweights a memory). A `remember` with `downweights` writes one row per
-- listed memory in the insert's transaction; a hard delete of either memory removes it.
CREATE TABLE memory_downweights (
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    memory_id bigint NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    by_memory_id bigint NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (memory_id, by_memory_id)
);
CREATE INDEX memory_downweights_by ON memory_downweights (by_memory_id);
