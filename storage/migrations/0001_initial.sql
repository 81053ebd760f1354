-- OwnSona initial schema. {dim} is the embedding dimension of the active
-- model, fixed when the database is first created (SUPPLEMENT §10 covers
-- switching it later).

CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE store_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);
INSERT INTO store_meta (key, value) VALUES ('embedding_dimensions', '{dim}');

CREATE TABLE users (
    id            bigserial PRIMARY KEY,
    username      text NOT NULL UNIQUE,
    password_hash text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    disabled      boolean NOT NULL DEFAULT false
);

CREATE TABLE memories (
    id                 bigserial PRIMARY KEY,
    user_id            bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    text               text NOT NULL,
    normalized_text    text NOT NULL,
    embedding          vector({dim}) NOT NULL,
    embedding_provider text NOT NULL,
    embedding_model    text NOT NULL,
    tags               text[] NOT NULL DEFAULT '{}',
    importance         double precision NOT NULL DEFAULT 0.5,
    keep               boolean NOT NULL DEFAULT false,
    source_provider    text,
    capture_mode       text,
    session_id         text,
    metadata           jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    last_confirmed_at  timestamptz,
    expires_at         timestamptz,
    deleted_at         timestamptz,
    forget_reason      text,
    replaced_by_id     bigint,
    salience           double precision NOT NULL DEFAULT 0
                       CHECK (salience >= -1 AND salience <= 1),
    use_count          integer NOT NULL DEFAULT 0,
    context_centroid   vector({dim}),
    context_count      integer NOT NULL DEFAULT 0
);

CREATE INDEX memories_embedding_hnsw ON memories USING hnsw (embedding vector_cosine_ops);
CREATE INDEX memories_tags_gin ON memories USING gin (tags);
CREATE INDEX memories_text_trgm ON memories USING gin (text gin_trgm_ops);
-- Exact duplicates (SUPPLEMENT §2). md5 because a btree entry cannot hold 16000 characters.
CREATE UNIQUE INDEX memories_active_normalized
    ON memories (user_id, md5(normalized_text)) WHERE deleted_at IS NULL;
CREATE INDEX memories_user_created ON memories (user_id, created_at DESC, id DESC);
CREATE INDEX memories_user_deleted ON memories (user_id) WHERE deleted_at IS NOT NULL;

-- One row per relation edge (SUPPLEMENT §6), owned by its source memory.
CREATE TABLE memory_relations (
    id                bigserial PRIMARY KEY,
    user_id           bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    memory_id         bigint NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    subject           text NOT NULL,
    predicate         text NOT NULL,
    object            text NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memory_relations_memory ON memory_relations (memory_id);
CREATE INDEX memory_relations_subject ON memory_relations (user_id, lower(subject));
CREATE INDEX memory_relations_object ON memory_relations (user_id, lower(object));

-- The answer to each acknowledged write, stored in the write's own
-- transaction: a redelivered message or a retried call finds it and returns
-- it instead of writing again.
CREATE TABLE write_receipts (
    user_id         bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    idempotency_key text NOT NULL,
    tool            text NOT NULL,
    result          jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, idempotency_key)
);
CREATE INDEX write_receipts_created ON write_receipts (created_at);

-- JWT signing keys, shared by every web process (SUPPLEMENT §8).
CREATE TABLE signing_keys (
    kid         text PRIMARY KEY,
    algorithm   text NOT NULL,
    private_jwk jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    retired_at  timestamptz
);
