"""The schema stays ready to shard by user on Citus (issue 29 item 5, docs/scaling.md).

Three properties, each checked on what the code really has and sends:

- every table of the migrated schema (read from information_schema) is either
  distributed by ``user_id`` (and carries it, NOT NULL) or named below as a
  reference table, with the reason: a new table must take a side;
- every statement the code sends against a distributed table filters by
  ``user_id`` (an INSERT names it): captured from a run of every MCP tool over
  the real use cases, on a pool whose cursors record each statement;
- no foreign key joins rows of two users: a key between two distributed
  tables includes ``user_id`` on both sides, and no reference table points
  into a distributed one (Citus refuses both otherwise).
"""

from __future__ import annotations

import re
from typing import Any

import falcon.testing
import psycopg
import pytest
from psycopg import AsyncCursor

from api.app import create_app
from api.mcp.tools import tool_specs
from api.runtime import Runtime
from auth.bearer import BearerValidator
from auth.keys import KeyStore
from auth.tokens import issue_access_token
from bootstrap.providers import make_extractor
from config.settings import Settings
from memory.deps import Deps
from memory.relations import extract_relations
from storage.citus_layout import DISTRIBUTED as LAYOUT_DISTRIBUTED
from storage.citus_layout import DROPPED_ON_CITUS
from storage.citus_layout import REFERENCE as LAYOUT_REFERENCE
from storage.pool import make_pool
from tests.api.conftest import Mcp
from tests.conftest import make_user
from tests.tool_calls import InlineWriteQueue
from tests.tool_samples import in_run_order, sample_arguments

#: Distributed by ``user_id``, colocated: a user's rows of all of them live on one node;
#: and the reference tables (a copy on every node) with the reason each is one. The lists
#: are the ones ``ownsona migrate`` places tables by on Citus (storage/citus_layout.py).
DISTRIBUTED = set(LAYOUT_DISTRIBUTED)
REFERENCE = LAYOUT_REFERENCE

#: Statements against a distributed table that may go without a user filter, and why.
#: Each is a regular expression over the statement (lower case, spaces collapsed). They
#: are maintenance across every user: on Citus each becomes a multi-shard statement run
#: on all nodes in parallel, correct and rare, never on a request's path to one user.
ALLOWED_UNFILTERED: dict[str, str] = {
    # A write prunes expired idempotency receipts now and then (memory.writes: 1 in N).
    r"^delete from write_receipts where created_at < ": "receipt expiry",
    # The console's uploads expire the same way (not reached by the tool run).
    r"^delete from console_uploads where created_at < ": "upload expiry",
}

_SPACES = re.compile(r"\s+")
#: ``user_id`` compared with a value (a parameter, a number written in, a list): a join
#: predicate (``r.user_id = m.user_id``) filters nothing by itself, and Citus cannot
#: route a statement by it.
_VALUE = r"(%s|%\(\w+\)s|\$\d+|\d+)"
_FILTER = re.compile(
    rf"\buser_id\s*(=\s*({_VALUE}|any\s*\()|in\s*\()|[\s(]{_VALUE}\s*=\s*(\w+\.)?user_id\b"
)


class RecordingCursor(AsyncCursor[Any]):
    """Records every statement it executes (the class attributes are per test).

    ``seen`` holds each statement's text (lower case, spaces collapsed); ``sent`` the
    statement as given and its parameters, to plan it again (on Citus, EXPLAIN).
    """

    seen: list[str] = []
    sent: list[tuple[Any, Any]] = []

    def _record(self, query: Any, params: Any = None) -> None:
        text = query if isinstance(query, str) else query.as_string(self)
        RecordingCursor.seen.append(_SPACES.sub(" ", str(text)).strip().lower())
        RecordingCursor.sent.append((query, params))

    async def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        self._record(query, params)
        return await super().execute(query, params, **kwargs)

    async def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
        params_seq = list(params_seq)
        self._record(query, params_seq[0] if params_seq else None)
        await super().executemany(query, params_seq, **kwargs)

    def copy(self, statement: Any, params: Any = None, **kwargs: Any) -> Any:
        self._record(statement)
        return super().copy(statement, params, **kwargs)


def _tables(dsn: str) -> dict[str, dict[str, str]]:
    """table -> {column: is_nullable} for every base table of the public schema."""
    tables: dict[str, dict[str, str]] = {}
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT c.table_name, c.column_name, c.is_nullable FROM information_schema.columns c"
            " JOIN information_schema.tables t USING (table_schema, table_name)"
            " WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE'"
        ).fetchall()
    for table, column, nullable in rows:
        tables.setdefault(table, {})[column] = nullable
    return tables


def test_every_table_is_distributed_by_user_or_a_named_reference_table(dsn: str) -> None:
    tables = _tables(dsn)
    assert DISTRIBUTED.isdisjoint(REFERENCE)
    # 0021's work tables stay on one node for the release before it; the move drops them.
    unplaced = set(tables) - DISTRIBUTED - set(REFERENCE) - set(DROPPED_ON_CITUS)
    assert not unplaced, f"place these tables in DISTRIBUTED or REFERENCE: {sorted(unplaced)}"
    assert set(tables) >= DISTRIBUTED | set(REFERENCE), "a listed table no longer exists"
    for table in DISTRIBUTED:
        assert tables[table].get("user_id") == "NO", f"{table} lacks a NOT NULL user_id"


def test_no_foreign_key_joins_rows_of_two_users(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        keys = conn.execute(
            "SELECT conname, conrelid::regclass::text, confrelid::regclass::text,"
            " ARRAY(SELECT attname FROM unnest(conkey) WITH ORDINALITY k(n, i)"
            "   JOIN pg_attribute ON attrelid = conrelid AND attnum = k.n ORDER BY k.i),"
            " ARRAY(SELECT attname FROM unnest(confkey) WITH ORDINALITY k(n, i)"
            "   JOIN pg_attribute ON attrelid = confrelid AND attnum = k.n ORDER BY k.i)"
            " FROM pg_constraint WHERE contype = 'f' AND connamespace = 'public'::regnamespace"
        ).fetchall()
    wrong = []
    for name, child, parent, columns, referenced in keys:
        if child in REFERENCE and parent in DISTRIBUTED:
            wrong.append(f"{name}: reference table {child} points into {parent}")
        if child in DISTRIBUTED and parent in DISTRIBUTED:
            pairs = list(zip(columns, referenced, strict=True))
            if ("user_id", "user_id") not in pairs:
                wrong.append(f"{name}: {child}{tuple(columns)} -> {parent}{tuple(referenced)}")
    assert not wrong, wrong


async def _every_tool(mcp: Mcp, deps: Deps, user_id: int) -> None:
    async def ok(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await mcp.call_tool(tool, arguments)
        assert result["isError"] is False, (tool, result)
        return result["structuredContent"]  # type: ignore[no-any-return]

    first = (await ok("remember", {"text": "My sister Ana lives in Porto.", "tags": ["family"]}))[
        "memory_id"
    ]
    batch = await ok(
        "remember_batch",
        {"items": [{"text": "Ana works as a nurse."}, {"text": "I live in Lisbon."}]},
    )
    second = batch["results"][0]["memory_id"]
    for memory_id in (first, second):
        await extract_relations(deps, user_id, memory_id)
    # Every tool of the registry, with its sample (tests.tool_samples), the deletes last.
    for spec in in_run_order(tool_specs(deps.settings).values()):
        await ok(spec.name, sample_arguments(spec, first))


@pytest.fixture
async def statements(clean_db: str, embedder: Any) -> list[str]:
    """Every statement sent while one user calls every tool (and their background jobs run)."""
    settings = Settings(public_url="https://mem.example")
    pool = make_pool(clean_db, min_size=1, max_size=4, name="shard-ready")
    assert isinstance(pool.kwargs, dict)  # make_pool's connection arguments: add ours
    pool.kwargs["cursor_factory"] = RecordingCursor
    await pool.open(wait=True)
    try:
        keystore = KeyStore(pool, access_token_ttl_s=settings.access_token_ttl_s)
        await keystore.load()
        user_id = make_user(clean_db, "alice")
        token = issue_access_token(
            keystore, settings, user_id=user_id, client_id="c", scope="memory:read memory:write"
        )
        deps = Deps(
            settings=settings, pool=pool, embedder=embedder, extractor=make_extractor(settings)
        )
        runtime = Runtime(
            settings, deps, InlineWriteQueue(deps), keystore, BearerValidator(keystore, settings)
        )
        RecordingCursor.seen = []
        RecordingCursor.sent = []
        async with falcon.testing.ASGIConductor(create_app(settings, runtime=runtime)) as app:
            await _every_tool(Mcp(app, token), deps, user_id)
        return list(RecordingCursor.seen)
    finally:
        await pool.close()


def _distributed_tables_in(statement: str) -> set[str]:
    return DISTRIBUTED & set(re.findall(r"[a-z_]+", statement))


def _filters_by_user(statement: str) -> bool:
    if statement.startswith(("insert", "copy")) or " insert into " in f" {statement}":
        return "user_id" in statement
    return bool(_FILTER.search(statement))


async def test_every_statement_against_a_user_table_filters_by_user(
    statements: list[str],
) -> None:
    touching = [s for s in statements if _distributed_tables_in(s)]
    assert len(touching) > 30, "the run reached too few statements to prove anything"
    seen_tables = set().union(*(_distributed_tables_in(s) for s in touching))
    assert {"memories", "memory_relations", "relation_outbox", "write_receipts"} <= seen_tables
    unfiltered = [
        s
        for s in touching
        if not _filters_by_user(s) and not any(re.search(p, s) for p in ALLOWED_UNFILTERED)
    ]
    assert not unfiltered, "\n\n".join(unfiltered)


def test_the_statement_check_catches_a_statement_without_a_user_filter() -> None:
    assert not _filters_by_user("select id, text from memories where id = %s")
    assert not _filters_by_user("update memories set importance = %s where id = any(%s)")
    assert _filters_by_user("select id from memories where user_id = %s and id = %s")
    assert _filters_by_user(
        "delete from memory_relations r using memories m where r.user_id = m.user_id and m.user_id = %s"
    )
    assert _filters_by_user("insert into memories (user_id, text) values (%s, %s)")
    # A join predicate alone is no user filter (issue 33, item 8).
    assert not _filters_by_user(
        "select r.id from memory_relations r join memories m on m.user_id = r.user_id"
        " where r.id = %s"
    )
    assert not _filters_by_user(
        "select 1 from write_receipts later where later.user_id = r.user_id and later.seq > %s"
    )
    assert _filters_by_user("select id from memories m where m.user_id = %(user_id)s")
    assert _filters_by_user("select id from memories m where m.user_id = 42 and m.id = %s")
    assert _filters_by_user("select id from memories m where %s = m.user_id")
    assert not _filters_by_user("insert into memory_relations (memory_id, subject) values (%s, %s)")
