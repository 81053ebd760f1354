"""On a Citus coordinator, put every table on its side (docs/scaling.md, "Which tables go where").

The migrations are the same on plain PostgreSQL and on Citus; they create ordinary
tables. After every migration run, :func:`apply_citus_layout` checks whether the
database is a Citus one (the ``citus`` extension is installed in it: ``CREATE EXTENSION
citus`` is what makes a database a coordinator) and, if so, places each table not
placed yet:

- per-user tables are distributed by ``user_id``, colocated with ``memories``, after
  their primary keys and unique constraints are made to include ``user_id`` (Citus
  requires it; the id stays unique on its own, by its sequence);
- the others become reference tables (a copy on every node).

It is idempotent (a placed table is skipped) and cheap when there is nothing to do,
so a later migration's new table gets its side on the next ``ownsona migrate``. A
table in neither list stays local, and ``tests/storage/test_shard_ready.py`` fails
until it takes a side. A database moved from one node keeps its rows: placing a
table copies its rows to the shards.

Settings recall depends on (pgvector's ``hnsw.ef_search`` and iterative scan) are
set per session by the pool on the coordinator, where they would not reach the
workers, which run the scans: they are set on every node's database instead.
"""

from __future__ import annotations

from typing import LiteralString

import psycopg
from psycopg import AsyncConnection, sql

from .errors import StorageError
from .terms import DROP_TRIGGERS

#: Distributed by ``user_id``, colocated with ``memories`` (placed in this order).
DISTRIBUTED: tuple[str, ...] = (
    "memories",
    "memory_relations",
    "memory_downweights",
    "relation_outbox",
    "write_receipts",
    "memory_terms",
    "memory_term_totals",
    "audit_events",
    "console_jobs",
    "console_uploads",
    "chat_import_extracted",
)

#: Reference tables (a copy on every node) and why: small, rarely written, read anywhere.
REFERENCE: dict[str, str] = {
    # The accounts: their id is the user_id every distributed table refers to.
    "users": "accounts",
    "schema_version": "bookkeeping",
    "store_meta": "bookkeeping",
    # The OAuth server: looked up by a client id, a token hash or a jti before any
    # user is known, a few writes per client per hour (docs/scaling.md, "OAuth").
    "signing_keys": "oauth",
    "oauth_clients": "oauth",
    "oauth_client_assertions": "oauth",
    "oauth_codes": "oauth",
    "oauth_consents": "oauth",
    "oauth_grants": "oauth",
    "oauth_refresh_tokens": "oauth",
    "oauth_grace_access_tokens": "oauth",
    "oauth_revoked_tokens": "oauth",
    "oauth_sessions": "oauth",
    "oauth_login_failures": "oauth",
    "cli_tokens": "oauth",
    "mcp_ended_sessions": "oauth",
}

#: ``storage.pool.HNSW_EF_SEARCH`` (only bootstrap may import the pool module; a test
#: checks the two agree).
HNSW_EF_SEARCH = 200

#: The distribution column of every distributed table.
USER_COLUMN = "user_id"

#: Tables a move to Citus drops: migration 0021's contract (``storage.terms.DROP_TRIGGERS``).
#: On one node they stay while a process of the release before 0021 may still write
#: through the triggers that use them; Citus refuses a table with triggers, and the
#: statements keep the counts and the outbox on every store.
DROPPED_ON_CITUS: tuple[str, ...] = ("memory_term_deltas", "memory_term_flush")


async def is_citus(conn: AsyncConnection) -> bool:
    """The database has the ``citus`` extension: it is a Citus coordinator."""
    cur = await conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'")
    return await cur.fetchone() is not None


async def apply_citus_layout(conn: AsyncConnection) -> list[str]:
    """Place every unplaced table of the public schema; return the tables placed.

    Does nothing on plain PostgreSQL. ``conn`` is in autocommit mode (Citus copies a
    table's rows to its shards in the statement that distributes it).
    """
    if not await is_citus(conn):
        return []
    await _contract_trigger_counting(conn)
    placed = await _placed_tables(conn)
    existing = await _public_tables(conn)
    todo_reference = [t for t in await _reference_order(conn, existing) if t not in placed]
    todo_distributed = [t for t in DISTRIBUTED if t in existing and t not in placed]
    for table in todo_reference:
        await _place(conn, table, "SELECT create_reference_table(%s)", (table,))
    if todo_distributed:
        # Citus refuses to distribute a table while an undistributed one points at it:
        # the keys between per-user tables are dropped and made again once all are placed,
        # in one transaction (a failure leaves the database as it was).
        async with conn.transaction():
            keys = await _keys_between(conn, set(todo_distributed), set(DISTRIBUTED) & existing)
            for name, child, _ in keys:
                await conn.execute(
                    sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(
                        sql.Identifier(child), sql.Identifier(name)
                    )
                )
            for table in todo_distributed:
                colocate = "none" if table == DISTRIBUTED[0] else DISTRIBUTED[0]
                await _keys_include_user(conn, table)
                await _place(
                    conn,
                    table,
                    "SELECT create_distributed_table(%s, %s, colocate_with => %s)",
                    (table, USER_COLUMN, colocate),
                )
            for name, child, definition in keys:
                await conn.execute(
                    sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} {}").format(
                        sql.Identifier(child), sql.Identifier(name), sql.SQL(definition)
                    )
                )
    await _recall_settings_on_every_node(conn)
    await _table_rows_per_shard(conn)
    return todo_reference + todo_distributed


async def _place(
    conn: AsyncConnection, table: str, statement: LiteralString, params: tuple[str, ...]
) -> None:
    try:
        await conn.execute(statement, params)
    except psycopg.Error as ex:
        raise StorageError(f"could not place table {table} on Citus: {ex}") from ex


async def _keys_between(
    conn: AsyncConnection, children: set[str], parents: set[str]
) -> list[tuple[str, str, str]]:
    """(name, table, definition) of each foreign key from ``children`` into ``parents``."""
    cur = await conn.execute(
        "SELECT conname, conrelid::regclass::text, confrelid::regclass::text,"
        " pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE contype = 'f' AND connamespace = 'public'::regnamespace ORDER BY conname"
    )
    return [
        (name, child, definition)
        for name, child, parent, definition in await cur.fetchall()
        if child in children and parent in parents
    ]


async def _placed_tables(conn: AsyncConnection) -> set[str]:
    """Distributed and reference tables (a table with a key into ``users`` is made a
    Citus-local table by Citus itself: that is no side, it stays on the coordinator)."""
    cur = await conn.execute(
        "SELECT table_name::text FROM citus_tables"
        " WHERE citus_table_type IN ('distributed', 'reference')"
    )
    return {row[0] for row in await cur.fetchall()}


async def _public_tables(conn: AsyncConnection) -> set[str]:
    cur = await conn.execute(
        "SELECT relname FROM pg_class"
        " WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p')"
    )
    return {row[0] for row in await cur.fetchall()}


async def _reference_order(conn: AsyncConnection, existing: set[str]) -> list[str]:
    """The reference tables, each after the tables its foreign keys point at."""
    cur = await conn.execute(
        "SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint"
        " WHERE contype = 'f' AND connamespace = 'public'::regnamespace"
    )
    points_at: dict[str, set[str]] = {}
    for child, parent in await cur.fetchall():
        if child != parent:
            points_at.setdefault(child, set()).add(parent)
    ordered: list[str] = []

    def visit(table: str) -> None:
        if table in ordered:
            return
        for parent in sorted(points_at.get(table, ())):
            if parent in REFERENCE and parent in existing:
                visit(parent)
        ordered.append(table)

    for table in REFERENCE:
        if table in existing:
            visit(table)
    return ordered


async def _contract_trigger_counting(conn: AsyncConnection) -> None:
    """Run 0021's contract (the counting triggers, their functions and work tables go).

    Only while any of it is left: Citus refuses even a ``DROP TRIGGER IF EXISTS`` on a
    placed table, so a later run (everything placed) must send nothing. On Citus no
    process of the release before 0021 writes: the move is made with this release.
    """
    cur = await conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid"
        " WHERE NOT t.tgisinternal AND p.proname = ANY(%s))"
        " OR EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = current_schema()"
        " AND tablename = ANY(%s))",
        (list(_COUNTING_FUNCTIONS), list(DROPPED_ON_CITUS)),
    )
    row = await cur.fetchone()
    if row is not None and row[0]:
        async with conn.transaction():
            await conn.execute(DROP_TRIGGERS)


#: The trigger functions of migrations 0002 and 0005 that 0021's contract drops.
_COUNTING_FUNCTIONS = (
    "memory_terms_collect",
    "memory_terms_flush",
    "relation_outbox_inserted",
    "relation_outbox_text_changed",
    "relation_outbox_edges_restored",
)


async def _keys_include_user(conn: AsyncConnection, table: str) -> None:
    """Every primary key and unique constraint of ``table`` names ``user_id`` first.

    A key already covered by another unique constraint on ``(user_id, its columns)``
    is dropped (``memories``' ``(id)`` next to migration 0020's ``(user_id, id)``,
    which becomes the replica identity shard moves copy by); any other gets
    ``user_id`` in front, under its own name.
    """
    cur = await conn.execute(
        "SELECT c.conname, c.contype,"
        " ARRAY(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY k(n, i)"
        "   JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i)"
        " FROM pg_constraint c WHERE c.conrelid = %s::regclass AND c.contype IN ('p', 'u')",
        (table,),
    )
    keys: list[tuple[str, str, list[str]]] = [
        (r[0], r[1], list(r[2])) for r in await cur.fetchall()
    ]
    by_columns = {tuple(columns): name for name, _, columns in keys}
    for name, kind, columns in keys:
        if USER_COLUMN in columns:
            continue
        covering = by_columns.get((USER_COLUMN, *columns))
        target = sql.Identifier(table)
        if covering is not None:
            await conn.execute(
                sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(target, sql.Identifier(name))
            )
            if kind == "p":
                await conn.execute(
                    sql.SQL("ALTER TABLE {} REPLICA IDENTITY USING INDEX {}").format(
                        target, sql.Identifier(covering)
                    )
                )
            continue
        # Two statements: Citus refuses ADD CONSTRAINT beside another subcommand.
        await conn.execute(
            sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(target, sql.Identifier(name))
        )
        await conn.execute(
            sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} {} ({})").format(
                target,
                sql.Identifier(name),
                sql.SQL("PRIMARY KEY" if kind == "p" else "UNIQUE"),
                sql.SQL(", ").join(sql.Identifier(c) for c in (USER_COLUMN, *columns)),
            )
        )


async def _recall_settings_on_every_node(conn: AsyncConnection) -> None:
    """pgvector's recall settings as database defaults, on the coordinator and every worker.

    The pool's per-session ``SET`` stays on the coordinator; a worker's scan would run
    with pgvector's defaults (ef_search 40, no iterative scan) and a filtered recall of a
    large user would come back short. Citus propagates ``ALTER DATABASE ... SET`` to the
    workers it has now (so this runs on every ``ownsona migrate``: a worker added since
    gets them too), and forwards ``SET LOCAL`` inside a transaction
    (``citus.propagate_set_commands``).
    """
    cur = await conn.execute("SELECT current_database()")
    row = await cur.fetchone()
    assert row is not None
    database = sql.Identifier(str(row[0]))
    for name, value in (
        ("hnsw.ef_search", str(HNSW_EF_SEARCH)),
        ("hnsw.iterative_scan", "relaxed_order"),
        ("citus.propagate_set_commands", "local"),
    ):
        await conn.execute(
            sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                database, sql.SQL(name), sql.Literal(value)
            )
        )


#: Migration 0026's ``ownsona_memories_rows`` on Citus: the row estimate of the
#: user's shard of ``memories``, on the worker that runs the statement (Citus ships a
#: router statement's function calls to it). Where the shard is not (a statement
#: the coordinator ran itself), -1, as before any ANALYZE: only the row bound applies.
#: The shard's oid is an InitPlan, found once: ``get_shard_id_for_distribution_column``
#: is volatile, and compared with ``pg_class.oid`` directly it made the lookup a scan
#: of the worker's whole ``pg_class`` (every shard of every table), calling it for
#: each row: 1.4 against 0.7 ms a call on the test cluster's 4 shards a table, more on
#: a real one (issue 32).
SHARD_ROWS_BODY = """
    SELECT coalesce((SELECT c.reltuples FROM pg_class c WHERE c.oid = (SELECT to_regclass(
        'memories_' || get_shard_id_for_distribution_column('memories', owner)))), -1)
"""
SHARD_ROWS_FUNCTION = f"""
CREATE OR REPLACE FUNCTION ownsona_memories_rows(owner bigint) RETURNS real
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $${SHARD_ROWS_BODY}$$
"""


async def _table_rows_per_shard(conn: AsyncConnection) -> None:
    """Give ``ownsona_memories_rows`` its Citus body, on every node.

    The statements choosing between an exact search and the HNSW index
    (``storage.memory_sql.TABLE_ROWS``) read the size of what the user's scan walks:
    their shard. Replaced only while another body is left (the one-node body, or an
    earlier Citus one; a later run sends nothing); ``create_distributed_function``
    puts it on every worker, a worker added later included, also for a database that
    had it before ``CREATE EXTENSION citus`` (a move from one node).
    """
    cur = await conn.execute(
        "SELECT prosrc = %s,"
        " EXISTS (SELECT 1 FROM pg_dist_object o WHERE o.classid = 'pg_proc'::regclass"
        "   AND o.objid = p.oid)"
        " FROM pg_proc p WHERE p.oid = to_regprocedure('ownsona_memories_rows(bigint)')",
        (SHARD_ROWS_BODY,),
    )
    row = await cur.fetchone()
    if row is None:
        return  # before migration 0026
    per_shard, on_every_node = row
    if not per_shard:
        await conn.execute(SHARD_ROWS_FUNCTION)
    if not on_every_node or not per_shard:
        await conn.execute(
            "SELECT create_distributed_function('ownsona_memories_rows(bigint)'::regprocedure)"
        )
