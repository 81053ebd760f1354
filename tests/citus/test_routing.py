"""Every statement a tool sends routes to one node (issue 32): the shard-ready checks, on Citus.

``tests/storage/test_shard_ready.py`` records every statement of a run of every MCP
tool (and relation extraction). Here the same run goes through a Citus coordinator,
and each statement that touches a distributed table is planned again with
``EXPLAIN``: it must be a router plan, one task on one node, with no subplan the
coordinator runs first. The maintenance statements that fan out across users are
named in ``ALLOWED_UNFILTERED`` there (and in docs/scaling.md).
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.types.string import StrDumper

from storage.citus_layout import DISTRIBUTED, REFERENCE
from tests.storage.test_shard_ready import (  # noqa: F401 (run here again, on Citus)
    ALLOWED_UNFILTERED,
    RecordingCursor,
    _distributed_tables_in,
    test_every_statement_against_a_user_table_filters_by_user,
    test_no_foreign_key_joins_rows_of_two_users,
)

_PLANNED = ("select", "with", "insert", "update", "delete")

#: Statements that reach one node but in more than one step, and why: none. The two
#: that read the table's row estimate from the coordinator's catalog (``pg_class``)
#: read it on the worker now, for the user's shard (migration 0026,
#: ``storage.citus_layout.SHARD_ROWS_FUNCTION``).
SEVERAL_STEPS_ON_ONE_NODE: dict[str, str] = {}


def _explain(conn: psycopg.Connection[Any], query: Any, params: Any) -> str:
    """The statement's plan, its parameters sent in text (Citus's remote EXPLAIN of a
    shard's statement can pass on neither a binary parameter nor an untyped one; the
    statements themselves run fine, planned with their values)."""
    text = query if isinstance(query, str) else query.as_string(conn)
    text = text.replace("%(q)b", "%(q)t").replace("%b", "%t")
    try:
        rows = conn.execute(sql.SQL("EXPLAIN (COSTS OFF) ") + sql.SQL(text), params).fetchall()
    except psycopg.Error as ex:
        return f"ERROR: {ex}"
    return "\n".join(str(row[0]) for row in rows)


def not_single_node(plan: str) -> bool:
    """A plan that is not one router task: several tasks, several steps, or no plan.

    Any subplan that asks a node is a step more: no.
    """
    counts = [int(n) for n in re.findall(r"Task Count: (\d+)", plan)]
    return (
        plan.startswith("ERROR")
        or counts != [1]
        or "pull to coordinator" in plan
        or "repartition" in plan
    )


def test_every_table_of_the_coordinator_is_distributed_or_a_reference_table(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        sides = dict(
            conn.execute(
                "SELECT c.relname::text, coalesce(t.citus_table_type, 'none')"
                " FROM pg_class c LEFT JOIN citus_tables t ON t.table_name = c.oid"
                " WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')"
            ).fetchall()
        )
        colocated = {
            row[0]
            for row in conn.execute(
                "SELECT table_name::text FROM citus_tables WHERE colocation_id ="
                " (SELECT colocation_id FROM citus_tables WHERE table_name = 'memories'::regclass)"
                " AND distribution_column = 'user_id'"
            )
        }
    assert {t for t, side in sides.items() if side == "distributed"} == set(DISTRIBUTED) & set(
        sides
    )
    assert colocated == set(DISTRIBUTED) & set(sides)
    assert {t for t, side in sides.items() if side == "reference"} == set(REFERENCE) & set(sides)


def test_every_request_statement_is_a_single_node_router_plan(
    statements: list[str], dsn: str
) -> None:
    sent = list(RecordingCursor.sent)
    assert len(sent) == len(statements)
    fanning_out = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        conn.adapters.register_dumper(str, StrDumper)  # typed as text (see _explain)
        for text, (query, params) in zip(statements, sent, strict=True):
            if not text.startswith(_PLANNED) or not _distributed_tables_in(text):
                continue
            if any(re.search(pattern, text) for pattern in ALLOWED_UNFILTERED):
                continue  # maintenance across users: fans out by design
            if text.startswith("insert into") and " values " in text and " select " not in text:
                # Routed by each row's user_id value (the columns name it: the check
                # above), and every insert the code sends is one user's rows. Citus's
                # remote EXPLAIN cannot plan it with its parameters, so it is not asked.
                continue
            plan = _explain(conn, query, params)
            several = any(re.search(p, text) for p in SEVERAL_STEPS_ON_ONE_NODE)
            if several and "Task Count: 1" in plan and not re.search(r"Task Count: [02-9]", plan):
                continue
            if not_single_node(plan):
                fanning_out.append(f"{text}\n--\n{plan}")
    assert not fanning_out, "\n\n====\n\n".join(fanning_out)


def test_the_router_check_catches_a_statement_that_fans_out(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        routed = _explain(conn, "SELECT id FROM memories WHERE user_id = %s AND id = %s", (1, 2))
        fans_out = _explain(conn, "SELECT id FROM memories WHERE id = %s", (2,))
    assert not not_single_node(routed), routed
    assert not_single_node(fans_out), fans_out
