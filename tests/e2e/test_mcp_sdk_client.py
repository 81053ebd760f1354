"""The official MCP SDK client drives a running ``ownsona serve`` over real HTTP."""

from __future__ import annotations

import asyncio
import json

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from storage.embedded import stop_embedded

from .server import run_processes


async def _scenario(url: str, token: str) -> None:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
        assert client.server_info is not None and client.server_info.name == "ownsona"
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"remember", "recall", "forget", "remember_batch", "export_memories"} <= tools

        son = await client.call_tool(
            "remember", {"text": "My son Colby lives in Los Angeles.", "tags": ["family"]}
        )
        assert son.is_error is False, son.structured_content
        son_id = son.structured_content["memory_id"]
        tea = await client.call_tool("remember", {"text": "I drink green tea every morning."})
        assert tea.is_error is False
        tea_id = tea.structured_content["memory_id"]
        assert json.loads(tea.content[0].text) == tea.structured_content  # type: ignore[union-attr]

        found = await client.call_tool("recall", {"query": "where does my son live", "limit": 5})
        matches = found.structured_content["matches"]
        assert matches[0]["id"] == son_id
        assert matches[0]["text"] == "My son Colby lives in Los Angeles."
        assert 0 < matches[0]["score"] <= 1

        gone = await client.call_tool("forget", {"id": son_id, "reason": "moved"})
        assert gone.structured_content["message"] == "Forgotten"

        again = await client.call_tool("recall", {"query": "where does my son live", "limit": 5})
        assert son_id not in [m["id"] for m in again.structured_content["matches"]]

        # Relation extraction runs in the background after the write; poll the graph.
        await client.call_tool("remember", {"text": "Dana is my manager."})
        await client.call_tool("remember", {"text": "Dana's husband is Lee."})
        edges: list = []
        for _ in range(100):
            graph = await client.call_tool(
                "query_relations", {"entity": "my manager", "max_hops": 2}
            )
            edges = graph.structured_content["relations"]
            if len(edges) >= 2:
                break
            await asyncio.sleep(0.1)
        assert {e["source_text"] for e in edges} == {
            "Dana is my manager.",
            "Dana's husband is Lee.",
        }

        helped = await client.call_tool(
            "reinforce", {"memory_ids": [tea_id], "query": "morning drink"}
        )
        assert helped.structured_content["reinforced"][0]["id"] == tea_id

        missing = await client.call_tool("get_memory", {"id": 999999})
        assert missing.is_error is True
        assert missing.structured_content["error"]["code"] == "NOT_FOUND"


async def test_embedded_default_end_to_end(tmp_path):
    """No DATABASE_URL, no REDIS_URL: embedded PostgreSQL and an in-process worker."""
    try:
        with run_processes(tmp_path) as server:
            await _scenario(server.url, server.token())
    finally:
        stop_embedded(tmp_path / "data")


async def test_redis_and_separate_worker_end_to_end(tmp_path, dsn, redis_url, clean_db):
    """DATABASE_URL + REDIS_URL: writes run on a separate `ownsona worker` process."""
    with run_processes(
        tmp_path, {"DATABASE_URL": dsn, "REDIS_URL": redis_url}, workers=1
    ) as server:
        await _scenario(server.url, server.token())
        assert "in-process" not in server.log()
