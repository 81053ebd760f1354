"""Every id a sequence hands out goes through ownsona_next_id (migration 0019, issue 29).

A table added later with a plain ``bigserial`` would reuse ids after an
asynchronous failover; this test names it.
"""

from __future__ import annotations

import psycopg


def test_every_sequence_default_survives_a_timeline_switch(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT c.relname, a.attname, pg_get_expr(d.adbin, d.adrelid)"
            " FROM pg_attrdef d JOIN pg_class c ON c.oid = d.adrelid"
            " JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum"
            " WHERE c.relnamespace = 'public'::regnamespace"
            " AND pg_get_expr(d.adbin, d.adrelid) ~ '(nextval|ownsona_next_id)\\('"
        ).fetchall()
    assert {"memories", "memory_relations", "users"} <= {table for table, _, _ in rows}
    plain = [f"{table}.{column}" for table, column, default in rows if "nextval(" in default]
    assert plain == [], f"ids that a promoted standby could hand out again: {plain}"
