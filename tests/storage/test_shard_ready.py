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
from storage.pool import make_pool
from tests.api.conftest import Mcp
from tests.conftest import make_user
from tests.tool_calls import InlineWriteQueue
from tests.tool_samples import in_run_order, sample_arguments

#: Distributed by ``user_id``, colocated: a user's rows of all of them live on one node.
DISTRIBUTED = {
    "memories",
    "memory_relations",
    "memory_downweights",
    "relation_outbox",
    "write_receipts",
    "memory_terms",
    "memory_term_totals",
    "memory_term_deltas",
    "audit_events",
    "console_jobs",
    "console_uploads",
    "chat_import_extracted",
}

#: Reference tables (a copy on every node): small, rarely written, read by every node.
REFERENCE = {
    # The accounts: their id is the user_id every distributed table refers to.
    "users": "accounts",
    "schema_version": "bookkeeping",
    "store_meta": "bookkeeping",
    # Transaction ids whose term deltas were folded in: no user, one row per flush.
    "memory_term_flush": "bookkeeping",
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
_FILTER = re.compile(r"\buser_id\s*(=|in\b|is\b)|=\s*(\w+\.)?user_id\b")


class RecordingCursor(AsyncCursor[Any]):
    """Records the text of every statement it executes (the class attribute is per test)."""

    seen: list[str] = []

    def _record(self, query: Any) -> None:
        text = query if isinstance(query, str) else query.as_string(self)
        RecordingCursor.seen.append(_SPACES.sub(" ", str(text)).strip().lower())

    async def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        self._record(query)
        return await super().execute(query, params, **kwargs)

    async def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
        self._record(query)
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
    unplaced = set(tables) - DISTRIBUTED - set(REFERENCE)
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
    assert not _filters_by_user("insert into memory_relations (memory_id, subject) values (%s, %s)")
