"""Re-embedding SQL (SUPPLEMENT §10): finding stale rows, rewriting them, the staging swap.

Two ways to move rows to the active model:

- **In place** (same dimension): ``embedding`` and the row's provider/model are
  rewritten together, so a row's own model says whether it is done.
- **Staged** (another dimension): a staging column ``embedding_next`` of the
  new width and its provider/model columns are added beside the live ones and
  filled while the server keeps reading ``embedding``. A trigger empties a
  row's staged vector whenever its live embedding changes (the old server
  edited the text), so an edit made during the fill is staged again. Once the
  column is full its HNSW index is built in bulk, concurrently
  (:func:`build_staging_index`), and :func:`swap_staging` then replaces the
  live columns in one transaction.

Progress lives in the rows themselves: an interrupted run leaves every
finished batch committed, and the next run skips those rows.

Every write is guarded by the text that was embedded: a row whose text changed
while its batch was being embedded is left for the next pass rather than given
a vector of its old text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from psycopg import AsyncConnection, sql

from . import sealed_rows
from .errors import StorageError

#: The staging columns and objects of a dimension switch.
STAGING_COLUMN = "embedding_next"
#: maintenance_work_mem for the staging index's bulk build: pgvector builds the
#: graph in memory while it fits (a 100k store of 384-d vectors needs ~180 MB)
#: and goes on far slower, row by row on disk, past it.
STAGING_BUILD_MEMORY = "256MB"
_STAGING_INDEX = "memories_embedding_next_hnsw"
_LIVE_INDEX = "memories_embedding_hnsw"
_TRIGGER = "memories_reembed_invalidate"

# The same names as they go into a statement.
_STAGED = {
    "col": sql.Identifier(STAGING_COLUMN),
    "col_provider": sql.Identifier(f"{STAGING_COLUMN}_provider"),
    "col_model": sql.Identifier(f"{STAGING_COLUMN}_model"),
    "trigger": sql.Identifier(_TRIGGER),
    "staging_index": sql.Identifier(_STAGING_INDEX),
    "live_index": sql.Identifier(_LIVE_INDEX),
}


def _staged(statement: str) -> sql.Composed:
    """``statement`` with the staging objects' names (``{col}``, ``{trigger}``...) filled in."""
    return sql.SQL(statement).format(**_STAGED)


@dataclass(frozen=True)
class StaleRow:
    """A row to re-embed. ``text``: as stored until :func:`opened`, then the text to embed.

    ``text_sealed``: the sealed text (docs/at-rest.md), None for a plain row; the
    write compares it, so a row changed meanwhile is left for the next pass.
    """

    id: int
    text: str
    user_id: int = 0
    text_sealed: bytes | None = None


async def column_dimensions(conn: AsyncConnection, column: str) -> int | None:
    """The width of ``memories.<column>`` (a pgvector column), or None if it does not exist."""
    row = await (
        await conn.execute(
            "SELECT atttypmod FROM pg_attribute"
            " WHERE attrelid = 'memories'::regclass AND attname = %s AND NOT attisdropped",
            (column,),
        )
    ).fetchone()
    return int(row[0]) if row else None


async def set_store_model(
    conn: AsyncConnection, provider: str, model: str, dimensions: int
) -> None:
    """Record the model the whole store is embedded with (store_meta)."""
    await conn.execute(
        "INSERT INTO store_meta (key, value) VALUES"
        " ('embedding_dimensions', %s), ('embedding_provider', %s), ('embedding_model', %s)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (str(dimensions), provider, model),
    )


# --- staging ----------------------------------------------------------------------


async def drop_staging(conn: AsyncConnection) -> None:
    """Remove an abandoned staging column (its index and trigger go with it)."""
    await conn.execute(_staged("DROP TRIGGER IF EXISTS {trigger} ON memories"))
    await conn.execute(
        _staged(
            "ALTER TABLE memories DROP COLUMN IF EXISTS {col},"
            " DROP COLUMN IF EXISTS {col_provider},"
            " DROP COLUMN IF EXISTS {col_model}"
        )
    )


async def create_staging(conn: AsyncConnection, dimensions: int) -> None:
    """Add the staging column of this width and the invalidating trigger.

    The columns are added empty (no table rewrite). The column's HNSW index
    comes after the fill (:func:`build_staging_index`): built in bulk it costs
    ~0.2 ms a row, against ~1.3 ms for each row inserted into a growing graph
    on top of the live graph's upkeep (BENCHMARKS.md).
    """
    await conn.execute(
        sql.SQL(
            "ALTER TABLE memories ADD COLUMN {col} vector({dims}),"
            " ADD COLUMN {col_provider} text, ADD COLUMN {col_model} text"
        ).format(**_STAGED, dims=sql.Literal(int(dimensions)))
    )
    # Kept in the row like the live vector (0002_hybrid.sql explains why).
    await conn.execute(_staged("ALTER TABLE memories ALTER COLUMN {col} SET STORAGE MAIN"))
    await conn.execute(
        _staged(
            """
        CREATE OR REPLACE FUNCTION {trigger}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.{col} := NULL;
            NEW.{col_provider} := NULL;
            NEW.{col_model} := NULL;
            RETURN NEW;
        END
        $$
        """
        )
    )
    # The live embedding changes only when the text was edited (and re-embedded
    # by the old model): the staged vector is then stale.
    await conn.execute(
        _staged(
            "CREATE TRIGGER {trigger} BEFORE UPDATE ON memories FOR EACH ROW"
            " WHEN (NEW.embedding IS DISTINCT FROM OLD.embedding) EXECUTE FUNCTION {trigger}()"
        )
    )


async def build_staging_index(conn: AsyncConnection) -> bool:
    """Build the staging column's HNSW index, unless a valid one exists; True if it built.

    ``CREATE INDEX CONCURRENTLY``: the server keeps reading and writing
    meanwhile, and rows staged during the build are indexed too. It cannot
    run in a transaction: ``conn`` must be in autocommit mode (the pool's
    are). A build that was interrupted leaves an invalid index behind, which
    is dropped and built again.
    """
    valid = await _staging_index_valid(conn)
    if valid:
        return False
    if valid is not None:
        await conn.execute(_staged("DROP INDEX CONCURRENTLY IF EXISTS {staging_index}"))
    await conn.execute(
        sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(STAGING_BUILD_MEMORY))
    )
    try:
        await conn.execute(
            _staged(
                "CREATE INDEX CONCURRENTLY {staging_index} ON memories"
                " USING hnsw ({col} vector_cosine_ops)"
            )
        )
    finally:
        await conn.execute("RESET maintenance_work_mem")
    return True


async def _staging_index_valid(conn: AsyncConnection) -> bool | None:
    """Whether the staging index is usable; None when there is none."""
    row = await (
        await conn.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", (_STAGING_INDEX,)
        )
    ).fetchone()
    return None if row is None else bool(row[0])


def _stale_condition(staged: bool) -> sql.Composable:
    """Rows not yet embedded by the model %(provider)s / %(model)s."""
    if staged:
        return sql.SQL(
            "(m.embedding_next IS NULL"
            " OR (m.embedding_next_provider, m.embedding_next_model)"
            " IS DISTINCT FROM (%(provider)s, %(model)s))"
        )
    return sql.SQL(
        "(m.embedding_provider, m.embedding_model) IS DISTINCT FROM (%(provider)s, %(model)s)"
    )


async def count_stale(conn: AsyncConnection, *, provider: str, model: str, staged: bool) -> int:
    """Rows (tombstones included) still to re-embed."""
    query = sql.SQL("SELECT count(*) FROM memories m WHERE {}").format(_stale_condition(staged))
    row = await (await conn.execute(query, {"provider": provider, "model": model})).fetchone()
    return int(row[0]) if row else 0


async def stale_ids_after(
    conn: AsyncConnection, after_id: int, limit: int, *, provider: str, model: str, staged: bool
) -> list[int]:
    """The next ``limit`` stale ids above ``after_id``, in id order (one pass of keyset paging)."""
    query = sql.SQL(
        "SELECT m.id FROM memories m WHERE m.id > %(after)s AND {} ORDER BY m.id LIMIT %(limit)s"
    ).format(_stale_condition(staged))
    cur = await conn.execute(
        query, {"after": after_id, "limit": limit, "provider": provider, "model": model}
    )
    return [int(r[0]) for r in await cur.fetchall()]


async def stale_rows(
    conn: AsyncConnection, ids: Sequence[int], *, provider: str, model: str, staged: bool
) -> list[StaleRow]:
    """Those of ``ids`` that are still stale, as stored: sealed ones still to open (:func:`opened`)."""
    query = sql.SQL(
        "SELECT m.id, m.text, m.user_id, m.text_sealed FROM memories m"
        " WHERE m.id = ANY(%(ids)s) AND {} ORDER BY m.id"
    ).format(_stale_condition(staged))
    cur = await conn.execute(query, {"ids": list(ids), "provider": provider, "model": model})
    return [
        StaleRow(int(r[0]), r[1], int(r[2]), None if r[3] is None else bytes(r[3]))
        for r in await cur.fetchall()
    ]


def opened(rows: Sequence[StaleRow]) -> list[StaleRow]:
    """The rows with their text to embed: a sealed one opened with its user's keys in
    scope (``storage.sealing.scope``), or refused (SealingError), never embedded as its stored ''."""
    return [
        replace(r, text=sealed_rows.open_text(r.user_id, r.id, r.text, r.text_sealed)) for r in rows
    ]


def _vector_params(
    rows: Sequence[StaleRow], vectors: Iterable[Any], *, provider: str, model: str
) -> dict[str, Any]:
    """Parameters of a vector write: the rows' ids and texts (a row whose text
    changed meanwhile is left for the next pass), their vectors (binary), the model."""
    return {
        "ids": [r.id for r in rows],
        # What the row stores: a sealed row's text is '' and its sealed value compared.
        "texts": [r.text if r.text_sealed is None else "" for r in rows],
        "sealed": [r.text_sealed for r in rows],
        "vs": list(vectors),
        "provider": provider,
        "model": model,
    }


#: What a vector write sets: the live columns (clearing the learned context,
#: which lives in the old model's space) or the staging ones.
_SET_LIVE = sql.SQL(
    """embedding = v.e, embedding_provider = %(provider)s, embedding_model = %(model)s,
            context_centroid = NULL, context_count = 0"""
)
_SET_STAGED = sql.SQL(
    """embedding_next = v.e, embedding_next_provider = %(provider)s,
            embedding_next_model = %(model)s"""
)


async def write_vectors(
    conn: AsyncConnection,
    rows: Sequence[StaleRow],
    vectors: Iterable[Any],
    *,
    provider: str,
    model: str,
    staged: bool,
) -> int:
    """Write these rows' vectors, live or (``staged``) staging; return how many were written.

    In place, the learned context centroid lives in the old model's space and
    cannot be translated: it is cleared with its count (docs/embedding-model.md), and
    a row the model already embedded is left alone. ``updated_at`` is left alone: the
    memory itself did not change.
    """
    unless_done = sql.SQL(
        ""
        if staged
        else "AND (m.embedding_provider, m.embedding_model) IS DISTINCT FROM (%(provider)s, %(model)s)"
    )
    cur = await conn.execute(
        sql.SQL(
            """
        UPDATE memories m
        SET {values}
        FROM unnest(%(ids)s::bigint[], %(texts)s::text[], %(sealed)s::bytea[], %(vs)b::vector[])
            AS v(id, text, sealed, e)
        WHERE m.id = v.id AND m.text = v.text AND m.text_sealed IS NOT DISTINCT FROM v.sealed
          {unless_done}
        """
        ).format(values=_SET_STAGED if staged else _SET_LIVE, unless_done=unless_done),
        _vector_params(rows, vectors, provider=provider, model=model),
    )
    return cur.rowcount


async def hold_autovacuum(conn: AsyncConnection) -> None:
    """Keep autovacuum off ``memories`` until :func:`resume_autovacuum` (a run rewrites every row).

    Each pass autovacuum makes over the table repairs the HNSW graph around
    the dead row versions, a cost that grows with the graph; a run that
    rewrites every row sets off a pass per fifth of the table. Measured at
    20,000 rows: 0.55 of the raw embedder with autovacuum, 0.84 without
    (BENCHMARKS.md). The run vacuums once at the end instead.
    """
    await conn.execute("ALTER TABLE memories SET (autovacuum_enabled = false)")


async def resume_autovacuum(conn: AsyncConnection) -> None:
    """Give ``memories`` back to autovacuum (its server-wide settings)."""
    await conn.execute("ALTER TABLE memories RESET (autovacuum_enabled)")


async def vacuum(conn: AsyncConnection) -> None:
    """Reclaim the dead row versions a run leaves and refresh statistics (autocommit only)."""
    await conn.execute("VACUUM (ANALYZE) memories")


async def lock_memories(conn: AsyncConnection) -> None:
    """Hold off every reader and writer of memories until this transaction ends."""
    await conn.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")


async def swap_staging(
    conn: AsyncConnection, *, provider: str, model: str, dimensions: int
) -> None:
    """Make the staged vectors the live ones; the caller holds the lock, has built the
    staging index and has checked that no row is stale. Run in one transaction with
    :func:`lock_memories`.

    Context centroids live in the old model's space and another width: the
    column is recreated empty and every count reset (docs/embedding-model.md).
    Every step changes the catalog only, so the lock is held for about the same
    short time however large the store: the counts are reset by recreating
    their column with its default (no rows are written), rather than by an
    UPDATE, which would write a new version of every row with a learned context
    into every index (HNSW included: ~1.3 ms a row, with the server held off).
    The one scan is SET NOT NULL's check of the new vector column.
    """
    if not await _staging_index_valid(conn):
        # Never make a column live without its index: every recall would scan the table.
        raise StorageError(
            "the staging column has no valid HNSW index; run `ownsona reembed` again"
        )
    await conn.execute(_staged("DROP TRIGGER IF EXISTS {trigger} ON memories"))
    # Dropping the live columns drops their HNSW index with them.
    await conn.execute(
        "ALTER TABLE memories DROP COLUMN embedding, DROP COLUMN embedding_provider,"
        " DROP COLUMN embedding_model, DROP COLUMN context_centroid"
    )
    await conn.execute(_staged("ALTER TABLE memories RENAME COLUMN {col} TO embedding"))
    await conn.execute(
        _staged("ALTER TABLE memories RENAME COLUMN {col_provider} TO embedding_provider")
    )
    await conn.execute(_staged("ALTER TABLE memories RENAME COLUMN {col_model} TO embedding_model"))
    await conn.execute(_staged("ALTER INDEX {staging_index} RENAME TO {live_index}"))
    await conn.execute(
        sql.SQL(
            "ALTER TABLE memories ALTER COLUMN embedding SET NOT NULL,"
            " ALTER COLUMN embedding_provider SET NOT NULL,"
            " ALTER COLUMN embedding_model SET NOT NULL,"
            " ADD COLUMN context_centroid vector({dims}),"
            " DROP COLUMN context_count,"
            " ADD COLUMN context_count integer NOT NULL DEFAULT 0"
        ).format(dims=sql.Literal(int(dimensions)))
    )
    await conn.execute("ALTER TABLE memories ALTER COLUMN context_centroid SET STORAGE MAIN")
    await set_store_model(conn, provider, model, dimensions)
