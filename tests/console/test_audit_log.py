"""The audit log records every tool call: who, which tool, which ids, never text."""

from __future__ import annotations

from typing import Any

import psycopg

from api.runtime import Runtime
from config.settings import Settings
from memory.audit import AuditLog
from tests.api.conftest import Mcp
from tests.conftest import make_user

SECRET_TEXT = "My locker combination is hidden behind the blue painting."


async def test_a_tool_call_is_recorded_with_ids_and_never_text(
    owner_mcp: Mcp, console_runtime: Runtime, clean_db: str, owner: int
) -> None:
    stored = await owner_mcp.call_tool("remember", {"text": SECRET_TEXT, "tags": ["home"]})
    memory_id = stored["structuredContent"]["memory_id"]
    found = await owner_mcp.call_tool("recall", {"query": "where is the locker combination"})
    assert found["structuredContent"]["matches"][0]["id"] == memory_id
    bad = await owner_mcp.call_tool("get_memory", {"id": memory_id + 99})
    assert bad["isError"]
    assert console_runtime.audit is not None
    await console_runtime.audit.flush()

    with psycopg.connect(clean_db) as conn:
        rows = conn.execute(
            "SELECT user_id, entry, client_id, tool, ok, error_code, read_ids, changed_ids,"
            " query, row_to_json(a)::text FROM audit_events a ORDER BY id"
        ).fetchall()
    assert [(r[3], r[4]) for r in rows] == [
        ("remember", True),
        ("recall", True),
        ("get_memory", False),
    ]
    remember, recall, missing = rows
    assert remember[:3] == (owner, "mcp", "test-assistant")
    assert remember[7] == [memory_id] and remember[6] == []
    assert recall[6] == [memory_id] and recall[7] == []
    assert missing[5] == "NOT_FOUND"
    assert all(r[8] is None for r in rows)  # query text is off by default
    for row in rows:
        assert "locker" not in row[9] and "painting" not in row[9]


async def test_a_record_the_database_refuses_is_dropped_alone(
    pool: Any, clean_db: str, owner: int
) -> None:
    log = AuditLog(pool, Settings())
    gone = make_user(clean_db, "gone")
    for user in (owner, gone, owner):
        log.record(
            user_id=user,
            entry="mcp",
            client_id="c",
            token_jti=None,
            tool="count_memories",
            read_only=True,
            arguments={},
            payload={"ok": True, "count": 0},
            duration_s=0.001,
        )
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("DELETE FROM users WHERE id = %s", (gone,))  # deleted meanwhile
    await log.flush()
    await log.flush()  # nothing left to retry
    with psycopg.connect(clean_db) as conn:
        users = [r[0] for r in conn.execute("SELECT user_id FROM audit_events ORDER BY id")]
    assert users == [owner, owner]
    await log.close()
