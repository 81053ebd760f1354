"""/mcp over the real use cases and PostgreSQL: remember, recall, forget.

The write queue here runs the use case in-process (what the Dramatiq
worker would do), so the tool path is the real one minus the broker.
"""

from __future__ import annotations

from typing import Any

import falcon.testing
import pytest

from api.app import create_app
from api.runtime import Runtime
from config.settings import Settings
from memory.deps import Deps
from tests.api.conftest import Mcp, open_session
from tests.tool_calls import InlineWriteQueue


@pytest.fixture
async def real_mcp(api_settings: Settings, pool: Any, embedder: Any, runtime: Runtime, token: str):
    deps = Deps(settings=api_settings, pool=pool, embedder=embedder)
    real = Runtime(api_settings, deps, InlineWriteQueue(deps), runtime.keystore, runtime.bearer)
    async with falcon.testing.ASGIConductor(create_app(api_settings, runtime=real)) as conductor:
        yield Mcp(conductor, token)


async def test_remember_recall_forget(real_mcp: Mcp) -> None:
    fact = {"text": "My son Colby lives in Los Angeles.", "tags": ["family"]}
    stored = await real_mcp.call_tool("remember", fact, mcp_session_id=await open_session(real_mcp))
    assert stored["isError"] is False, stored
    memory_id = stored["structuredContent"]["memory_id"]

    found = await real_mcp.call_tool("recall", {"query": "where does my son live"})
    assert found["isError"] is False
    assert found["structuredContent"]["matches"][0]["id"] == memory_id

    missing = await real_mcp.call_tool("get_memory", {"id": memory_id + 1000})
    assert missing["isError"] is True
    assert missing["structuredContent"]["error"]["code"] == "NOT_FOUND"

    bad = await real_mcp.call_tool("recall", {"query": 5})
    assert bad["isError"] is True and bad["structuredContent"]["error"]["code"] == "INVALID_INPUT"

    gone = await real_mcp.call_tool("forget", {"id": memory_id, "reason": "moved"})
    assert gone["structuredContent"]["message"] == "Forgotten"
    count = await real_mcp.call_tool("count_memories", {})
    assert count["structuredContent"]["count"] == 0


async def test_a_retried_write_is_done_once(real_mcp: Mcp) -> None:
    stored = await real_mcp.call_tool("remember", {"text": "I prefer window seats on flights."})
    memory_id = stored["structuredContent"]["memory_id"]
    # Same session, same JSON-RPC id, same arguments: a client retry. The worker
    # finds the first run's receipt under the same key and answers it again.
    session, other = await open_session(real_mcp), await open_session(real_mcp)
    first = await real_mcp.call_tool("confirm", {"id": memory_id}, mcp_session_id=session)
    again = await real_mcp.call_tool("confirm", {"id": memory_id}, mcp_session_id=session)
    assert first["structuredContent"] == again["structuredContent"]
    # A new request is a new confirmation: within the retry window identical
    # arguments are a retry whatever the session, so it names itself (docs/protocol.md,
    # "Retries").
    later = await real_mcp.call_tool(
        "confirm", {"id": memory_id}, mcp_session_id=other, idempotency_key="confirm-again"
    )
    confirmed_at = later["structuredContent"]["last_confirmed_at"]
    assert confirmed_at > first["structuredContent"]["last_confirmed_at"]
    fetched = await real_mcp.call_tool("get_memory", {"id": memory_id})
    assert fetched["structuredContent"]["memory"]["last_confirmed_at"] == confirmed_at
