"""Every tool's outputSchema against real results: the use cases, PostgreSQL, the local model.

Each tool is called through the app (``/mcp``, tools/call) with the real use
cases; queued tools run in-process, as a worker would run them. Every result,
success and error, must validate against the schema its tool lists (JSON
Schema 2020-12, as MCP 2026-07-28 says and the official SDK validates), and
its text must be the same JSON as its structuredContent. The schemas are
open objects, so validation alone would not notice a schema naming a field
the payloads do not have: every success field a schema names must appear in
a real result.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import falcon.testing
import httpx2
import pytest
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from api.app import create_app
from api.errors import database_payload, internal_payload
from api.mcp.tools import tool_specs
from api.runtime import Runtime
from bootstrap.providers import make_extractor
from config.settings import Settings
from memory.deps import Deps
from memory.relations import extract_relations
from tests.api.conftest import PUBLIC_URL, FakeUseCases, Mcp
from tests.tool_calls import InlineWriteQueue
from tests.tool_samples import misspelt, sample_arguments


@pytest.fixture
def deps(api_settings: Settings, pool: Any, embedder: Any) -> Deps:
    return Deps(
        settings=api_settings,
        pool=pool,
        embedder=embedder,
        extractor=make_extractor(api_settings),
    )


@pytest.fixture
def real_runtime(deps: Deps, runtime: Runtime) -> Runtime:
    return Runtime(deps.settings, deps, InlineWriteQueue(deps), runtime.keystore, runtime.bearer)


@pytest.fixture
async def real_mcp(real_runtime: Runtime, token: str) -> AsyncIterator[Mcp]:
    app = create_app(real_runtime.settings, runtime=real_runtime)
    async with falcon.testing.ASGIConductor(app) as conductor:
        yield Mcp(conductor, token)


class Results:
    """Calls tools and checks each result against its tool's listed outputSchema."""

    def __init__(self, mcp: Mcp, listing: list[dict[str, Any]]) -> None:
        self.mcp = mcp
        self.schemas = {tool["name"]: tool["outputSchema"] for tool in listing}
        self.successes: dict[str, list[dict[str, Any]]] = {name: [] for name in self.schemas}
        self.errors: dict[str, list[str]] = {name: [] for name in self.schemas}

    async def ok(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        payload = await self._call(tool, args)
        assert payload["ok"] is True, (tool, payload)
        self.successes[tool].append(payload)
        return payload

    async def error(self, tool: str, args: dict[str, Any], code: str) -> None:
        payload = await self._call(tool, args)
        assert payload["ok"] is False and payload["error"]["code"] == code, (tool, payload)
        self.errors[tool].append(code)

    async def _call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await self.mcp.call_tool(tool, args)
        payload = result["structuredContent"]
        # Both parts carry everything: Claude Code shows structuredContent, claude.ai the text.
        assert json.loads(result["content"][0]["text"]) == payload
        assert result["isError"] is (payload["ok"] is False)
        errors = [e.message for e in Draft202012Validator(self.schemas[tool]).iter_errors(payload)]
        assert not errors, (tool, errors, payload)
        return payload  # type: ignore[no-any-return]


async def _listing(mcp: Mcp) -> list[dict[str, Any]]:
    result = await mcp.request("tools/list")
    assert result.status_code == 200
    return result.json["result"]["tools"]  # type: ignore[no-any-return]


async def test_every_tool_result_matches_its_output_schema(
    real_mcp: Mcp, deps: Deps, user_id: int
) -> None:
    r = Results(real_mcp, await _listing(real_mcp))

    # --- writes ---------------------------------------------------------------------
    manager = (await r.ok("remember", {"text": "Dana is my manager.", "tags": ["work"]}))[
        "memory_id"
    ]
    husband = (await r.ok("remember", {"text": "Dana's husband is Lee.", "tags": ["family"]}))[
        "memory_id"
    ]
    seats = await r.ok(
        "remember", {"text": "I prefer window seats on flights.", "tags": ["travel"]}
    )
    near = await r.ok("remember", {"text": "I prefer window seats on planes.", "tags": ["travel"]})
    assert near["near_duplicates"] and near["near_duplicates"][0]["id"] == seats["memory_id"]
    await r.error("remember", {"text": ""}, "INVALID_INPUT")
    await r.error("remember", {"text": "My key is sk-ant-api03-" + "a" * 40}, "SECRET_REJECTED")

    batch = await r.ok(
        "remember_batch", {"items": [{"text": "Kites fly in spring."}, {"text": ""}]}
    )
    assert [item["ok"] for item in batch["results"]] == [True, False]
    kites = batch["results"][0]["memory_id"]
    await r.error("remember_batch", {"items": []}, "INVALID_INPUT")

    await r.ok("update_memory", {"id": kites, "tags": ["hobbies"]})
    await r.ok("update_memory", {"id": kites, "text": "Kites fly best in spring.", "dry_run": True})
    await r.error("update_memory", {"id": 999_999, "tags": ["x"]}, "NOT_FOUND")
    await r.error("update_memory", {"id": kites}, "INVALID_INPUT")
    edits = await r.ok(
        "update_memory_batch",
        {"items": [{"id": kites, "importance": 0.9}, {"id": 999_999, "tags": ["x"]}, {"id": "x"}]},
    )
    assert [item["ok"] for item in edits["results"]] == [True, False, False]
    await r.error("update_memory_batch", {"items": []}, "INVALID_INPUT")

    await r.ok("confirm", {"id": manager})
    await r.error("confirm", {"id": 999_999}, "NOT_FOUND")
    await r.ok("reinforce", {"memory_ids": [manager, 999_999], "query": "who is my manager"})
    await r.ok("reinforce", {"memory_ids": [husband], "delta": -0.5})
    await r.error("reinforce", {"memory_ids": []}, "INVALID_INPUT")

    # A soft-deleted memory, so that previously_corrected, tombstone fields and
    # already_deleted all show up in real results.
    await r.ok("forget", {"id": near["memory_id"], "reason": "duplicate", "dry_run": True})
    await r.ok("forget", {"id": near["memory_id"], "reason": "duplicate"})
    await r.ok("forget", {"id": near["memory_id"]})  # already deleted: the tombstone is kept
    again = await r.ok("remember", {"text": "I prefer window seats on planes.", "tags": ["travel"]})
    assert again["previously_corrected"][0]["id"] == near["memory_id"]
    await r.error("forget", {"id": 999_999}, "NOT_FOUND")
    await r.error("forget", {"id": kites, "hard_delete": True, "reason": "x"}, "INVALID_INPUT")
    swept = await r.ok("forget_batch", {"ids": [again["memory_id"], 999_999, "x"]})
    assert [item["ok"] for item in swept["results"]] == [True, False, False]
    await r.error("forget_batch", {"ids": []}, "INVALID_INPUT")
    await r.ok("forget", {"id": kites, "hard_delete": True})

    # --- reads ------------------------------------------------------------------------
    for tool in ("recall", "search_memory"):
        found = await r.ok(tool, {"query": "where do I like to sit on a plane", "explain": True})
        assert found["matches"] and "explain" in found["matches"][0]
        await r.ok(tool, {"query": "nothing like this", "min_score": 0.99})
        await r.error(tool, {"query": ""}, "INVALID_INPUT")
    await r.ok("build_context_prompt", {"user_prompt": "Who is my manager?", "max_chars": 200})
    await r.error("build_context_prompt", {"user_prompt": "x", "limit": 0}, "INVALID_INPUT")
    listed = await r.ok("list_memories", {"include_deleted": True})
    assert any("deleted_at" in m for m in listed["memories"])
    await r.error("list_memories", {"min_chars": 5, "max_chars": 2}, "INVALID_INPUT")
    await r.ok("text_search", {"text": "Dana"})
    await r.error("text_search", {"text": ""}, "INVALID_INPUT")
    tomb = await r.ok("get_memory", {"id": near["memory_id"]})
    assert tomb["memory"]["deleted_at"] and tomb["memory"]["forget_reason"] == "duplicate"
    await r.ok("get_memory", {"id": manager})
    await r.error("get_memory", {"id": 999_999}, "NOT_FOUND")
    await r.ok("count_memories", {"tags": ["travel"], "untagged_only": False})
    await r.error("count_memories", {"not_confirmed_since": "yesterday"}, "INVALID_INPUT")
    await r.ok("memory_stats", {})
    await r.error("memory_stats", {"verbose": True}, "INVALID_INPUT")
    await r.ok("list_tags", {"include_deleted": True})
    await r.error("list_tags", {"limit": 0}, "INVALID_INPUT")
    exported = await r.ok("export_memories", {})
    assert exported["count"] == len(exported["memories"]) >= 4
    await r.error("export_memories", {"include_deleted": "yes"}, "INVALID_INPUT")

    # The relation graph, filled as the background job would fill it.
    for memory_id in (manager, husband):
        await extract_relations(deps, user_id, memory_id)
    relations = await r.ok("query_relations", {"entity": "my manager", "max_hops": 2})
    assert len(relations["relations"]) == 2
    await r.ok("query_relations", {"entity": "nobody at all"})
    await r.error("query_relations", {"entity": ""}, "INVALID_INPUT")

    # --- the scans --------------------------------------------------------------------
    await r.ok("remember", {"text": "I like window seats on long flights.", "tags": ["travel"]})
    dupes = await r.ok("find_near_duplicates", {"threshold": 0.8})
    conflicts = await r.ok("find_conflicts", {})
    assert dupes["groups"] and conflicts["groups"]
    await r.ok("find_near_duplicates", {"threshold": 1.0})
    await r.error("find_near_duplicates", {"threshold": 0.2}, "INVALID_INPUT")
    await r.error("find_conflicts", {"max_groups": 501}, "INVALID_INPUT")

    # A tool the calls above leave out (one added since): its sample, and a misspelt field.
    specs = tool_specs(deps.settings)
    assert set(specs) == set(r.schemas)
    for name, spec in specs.items():
        if not r.successes[name]:
            await r.ok(name, sample_arguments(spec, manager))
        if not r.errors[name]:
            await r.error(name, misspelt(spec, manager)[0], "INVALID_INPUT")

    # Every tool was seen succeeding and failing.
    assert all(r.successes.values()) and all(r.errors.values())
    # Open schemas accept any extra field, so a misspelt one would pass unseen:
    # each success field a schema names appears in some real result.
    for tool, schema in r.schemas.items():
        named = set(schema["properties"]) - {"error"}
        seen = {key for payload in r.successes[tool] for key in payload}
        assert named <= seen, (tool, named - seen)


def test_the_server_side_failures_match_every_schema() -> None:
    # DATABASE_ERROR and INTERNAL_ERROR (a timeout too) come from api.errors for any tool.
    for spec in tool_specs(Settings()).values():
        validator = Draft202012Validator(spec.output_schema)
        for payload in (database_payload(), internal_payload()):
            assert validator.is_valid(payload), spec.name


def test_the_schemas_can_fail() -> None:
    # Not vacuous: a wrong type, a nested row without its text, a group without memories.
    specs = tool_specs(Settings())

    def valid(tool: str, payload: dict[str, Any]) -> bool:
        return Draft202012Validator(specs[tool].output_schema).is_valid(payload)

    assert valid("recall", {"ok": True, "matches": [{"id": 1, "text": "x", "score": 0.5}]})
    assert not valid("recall", {"ok": True, "matches": "x"})
    assert not valid("recall", {"ok": True, "matches": [{"id": 1}]})
    assert not valid("remember", {"ok": True, "memory_id": "12"})
    assert not valid("find_conflicts", {"ok": True, "groups": [{"ids": [1, 2]}]})
    group = {"ids": [1, 2], "max_similarity": 0.9, "memories": [{"id": 1, "text": "a"}]}
    assert valid("find_conflicts", {"ok": True, "groups": [{**group, "reason": "relation"}]})
    assert not valid("find_conflicts", {"ok": True, "groups": [{**group, "reason": "hunch"}]})


# --- the official SDK client (mcp 2.3), which validates structuredContent -------------


@asynccontextmanager
async def _sdk(app: Any, token: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), headers={"Authorization": f"Bearer {token}"}
    )
    transport = streamable_http_client(f"{PUBLIC_URL}/mcp", http_client=http)
    async with http, Client(transport) as client:
        yield client


async def test_the_sdk_client_accepts_real_successes_and_errors(
    real_runtime: Runtime, token: str
) -> None:
    app = create_app(real_runtime.settings, runtime=real_runtime)
    async with _sdk(app, token) as client:
        listing = await client.list_tools()
        assert all(tool.output_schema for tool in listing.tools)
        stored = await client.call_tool("remember", {"text": "My son Colby lives in LA."})
        assert stored.is_error is False and stored.structured_content is not None
        memory_id = stored.structured_content["memory_id"]
        found = await client.call_tool("recall", {"query": "where does my son live"})
        assert found.is_error is False and found.structured_content is not None
        assert found.structured_content["matches"][0]["id"] == memory_id
        missing = await client.call_tool("get_memory", {"id": memory_id + 1000})
        assert missing.is_error is True and missing.structured_content is not None
        assert missing.structured_content["error"]["code"] == "NOT_FOUND"
        # The SDK checks only successes; the error still meets the schema it would use.
        get_memory = next(t for t in listing.tools if t.name == "get_memory")
        assert get_memory.output_schema is not None
        Draft202012Validator(get_memory.output_schema).validate(missing.structured_content)


async def test_the_sdk_client_refuses_a_result_off_its_schema(
    api_settings: Settings, runtime: Runtime, use_cases: FakeUseCases, token: str
) -> None:
    # The control for the test above: the SDK does validate against our schemas.
    app = create_app(api_settings, runtime=dataclasses.replace(runtime, run_inline=use_cases))
    use_cases.payload = {"ok": True, "matches": [{"id": 1}]}
    async with _sdk(app, token) as client:
        with pytest.raises(RuntimeError, match="Invalid structured content"):
            await client.call_tool("recall", {"query": "anything"})
