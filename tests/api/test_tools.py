"""tools/list and tools/call: the registry as clients see it, and the result envelope."""

from __future__ import annotations

import json
import logging
import re

import pytest
from jsonschema import Draft202012Validator

from api.mcp.dispatch import idempotency_key
from api.mcp.tools import (
    DATA_NOT_INSTRUCTIONS,
    PREFER_RECENT,
    retry_safe,
    tool_specs,
)
from config.settings import Settings
from memory.commands import REGISTERED, MemoryStats, Recall, Remember, from_json
from memory.errors import NOT_FOUND, MemoryServiceError
from memory.handlers import HANDLERS, read_commands
from tests.api.conftest import FakeUseCases, FakeWriteQueue, Mcp, open_session

#: The registry, as the server builds it: every check below covers every tool in it.
SPECS = tool_specs(Settings())


@pytest.fixture
def api_settings(api_settings: Settings) -> Settings:
    # The session and random key rules below hold with the retry window off;
    # the window itself is tested in tests/api/test_protocol_2026.py.
    return api_settings.with_overrides(idempotency_window_s=0)


#: The writes (their handlers change the store): each is queued, for its receipt.
WRITES = {name for name, spec in SPECS.items() if not spec.read_only}
#: The tools whose result is stored text: their descriptions say it is data.
RETURNS_TEXT = (
    "recall", "search_memory", "get_memory", "list_memories", "text_search", "query_relations",
)  # fmt: skip
SECRET = "My son Colby lives in Los Angeles."


async def list_tools(mcp: Mcp) -> list[dict]:
    result = await mcp.request("tools/list", {"cursor": "ignored"})
    assert result.status_code == 200
    body = result.json["result"]
    assert "nextCursor" not in body
    return body["tools"]  # type: ignore[no-any-return]


# --- the registry -----------------------------------------------------------------


def test_every_tool_is_one_command_with_one_handler() -> None:
    """The recipe for a tool (docs/adding-a-tool.md): a command class, its handler
    declared with @handles, and the declaration naming the class; nothing else maps
    names to code."""
    specs = tool_specs(Settings())
    assert list(specs) == list(SPECS)
    # A write is queued: the worker's receipt makes its retry safe (the scans, which only
    # read, are queued for their size).
    assert {name for name, spec in specs.items() if spec.queued} >= WRITES
    # What a replica may serve is exactly what the read-only tools run inline or queued.
    assert set(read_commands()) == {spec.command for spec in specs.values() if spec.read_only}
    for spec in specs.values():
        assert spec.command in HANDLERS, spec.name
        # Registered for the queue's JSON under its type name (never the tool's).
        assert REGISTERED[spec.command.type_name()] is spec.command
    # Every command has a tool, and only recall and search_memory share one.
    commands = [spec.command for spec in specs.values()]
    assert set(commands) == set(HANDLERS) == set(REGISTERED.values())
    shared = {c for c in commands if commands.count(c) > 1}
    assert shared == {Recall}
    assert specs["recall"].command is specs["search_memory"].command


async def test_tools_list_shows_every_tool_with_schema_and_hints(mcp: Mcp) -> None:
    tools = await list_tools(mcp)
    # Every tool of the registry, in its order, every time.
    assert [t["name"] for t in tools] == list(SPECS)
    for tool in tools:
        schema = tool["inputSchema"]
        Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert tool["description"]
        # Through 2025-11-25 an outputSchema's root must be an object schema.
        output = tool["outputSchema"]
        Draft202012Validator.check_schema(output)
        assert output["type"] == "object"
        # The directories' checklist (issue 27): a human title and explicit hints.
        hints = dict(tool["annotations"])
        assert isinstance(hints.pop("title"), str) and tool["annotations"]["title"]
        assert all(isinstance(v, bool) for v in hints.values()), tool["name"]
        assert hints["openWorldHint"] is False  # only the caller's own store
        # Read-only exactly when the tool's handler is declared @handles(..., reads=True).
        read_only = hints["readOnlyHint"]
        assert read_only is (tool["name"] not in WRITES)
        if read_only:
            assert set(hints) == {"readOnlyHint", "openWorldHint"}
        else:
            assert isinstance(hints["destructiveHint"], bool)
            assert hints.get("idempotentHint", True) is True  # stated only where true


async def test_write_hints(mcp: Mcp) -> None:
    hints = {t["name"]: t["annotations"] for t in await list_tools(mcp)}
    for name in hints:
        hints[name].pop("title")
    closed = {"readOnlyHint": False, "openWorldHint": False}
    # remember retires what supersedes names and ranks downweights lower: destructive.
    for name in ("remember", "remember_batch"):
        assert hints[name] == {**closed, "destructiveHint": True}, name
    for name in ("forget", "forget_batch", "update_memory", "update_memory_batch"):
        assert hints[name] == {**closed, "destructiveHint": True, "idempotentHint": True}, name
    assert hints["confirm"] == hints["reinforce"] == {**closed, "destructiveHint": False}


async def test_descriptions_carry_the_safety_and_usage_notes(mcp: Mcp) -> None:
    tools = {t["name"]: t for t in await list_tools(mcp)}
    for name in RETURNS_TEXT:
        assert DATA_NOT_INSTRUCTIONS in tools[name]["description"], name
    assert PREFER_RECENT in tools["recall"]["description"]
    assert "recall" in tools["search_memory"]["description"]
    assert "last_confirmed_at, then updated_at, then created_at" in PREFER_RECENT
    assert "older_than" in PREFER_RECENT
    assert "forget repeatedly" in tools["forget_batch"]["description"]
    assert "update_memory" in tools["update_memory_batch"]["description"]
    # This file's server keeps no retry window (IDEMPOTENCY_WINDOW_S=0): the sentence says so.
    retry = retry_safe(0)
    assert retry.startswith("Retries with the same Idempotency-Key")
    # In full once, in remember; every other queued write points at it; nowhere else (a
    # scan writes nothing).
    for name, tool in tools.items():
        description = tool["description"]
        assert description.count(retry) == (name == "remember"), name
        pointer = re.search(r"Retry-safe as (\w+)\.", description)
        if name in WRITES - {"remember"}:
            assert pointer is not None and pointer[1] == "remember", name
        else:
            assert pointer is None, name
    # The chapter's errors a model must expect, named where they apply.
    assert "SECRET_REJECTED" in tools["remember"]["description"]
    assert "NOT_FOUND" in tools["update_memory"]["description"]
    assert "LIMIT_EXCEEDED" in tools["export_memories"]["description"]


def test_the_retry_sentence_names_the_window_the_server_keeps() -> None:
    assert retry_safe(600) == (
        "Retries within 10 minutes or with the same Idempotency-Key return the first result, "
        "writing nothing."
    )
    assert "within 90 seconds" in retry_safe(90)
    assert "within" not in retry_safe(0)


async def test_schemas_document_the_supplement_fields(mcp: Mcp) -> None:
    tools = {t["name"]: t["inputSchema"] for t in await list_tools(mcp)}
    remember = tools["remember"]["properties"]
    assert remember["keep"]["type"] == "boolean"
    for field in ("supersedes", "downweights"):
        assert remember[field] == {**remember[field], "type": "array"}
        assert remember[field]["items"]["type"] == "integer"
    item = tools["remember_batch"]["properties"]["items"]["items"]
    assert {"text", "supersedes", "downweights", "keep"} <= set(item["properties"])
    assert item["required"] == ["text"]
    assert tools["update_memory"]["properties"]["keep"]["type"] == "boolean"
    assert tools["remember"]["required"] == ["text"]
    assert tools["recall"]["required"] == ["query"]
    # Limits follow the settings (the tests' batch cap is 5).
    assert tools["forget_batch"]["properties"]["ids"]["maxItems"] == 5


async def test_schemas_offer_event_time_on_every_write_of_a_memory(mcp: Mcp) -> None:
    tools = {t["name"]: t["inputSchema"] for t in await list_tools(mcp)}
    event = ("occurred_at", "valid_from", "valid_to")
    remember = tools["remember"]["properties"]
    for field in (*event, "reference_time"):
        assert remember[field]["format"] == "date-time", field
    # The default is said once: a date the text states.
    assert "text" in remember["occurred_at"]["description"]
    assert "relative" in remember["reference_time"]["description"]
    item = tools["remember_batch"]["properties"]["items"]["items"]["properties"]
    assert {*event, "reference_time"} <= set(item)
    update = tools["update_memory"]["properties"]
    for field in event:  # null clears it
        assert update[field]["type"] == ["string", "null"], field
    update_item = tools["update_memory_batch"]["properties"]["items"]["items"]["properties"]
    assert set(event) <= set(update_item)
    assert "reference_time" not in update


def test_schemas_accept_the_chapters_examples() -> None:
    specs = tool_specs(Settings())

    def valid(name: str, args: dict) -> bool:
        return Draft202012Validator(specs[name].input_schema).is_valid(args)

    assert valid("remember", {"text": SECRET, "tags": ["family"], "capture_mode": "explicit"})
    assert valid("recall", {"query": "where does my son live", "limit": 5, "tags": ["family"]})
    assert valid("update_memory", {"id": 3, "expires_at": None})
    assert valid("memory_stats", {})
    assert not valid("remember", {"txt": SECRET})
    assert not valid("recall", {"query": "x", "limit": 51})


# --- tools/call --------------------------------------------------------------------


async def test_inline_tool_result_envelope(mcp: Mcp, use_cases: FakeUseCases, user_id: int) -> None:
    use_cases.payload = {"ok": True, "matches": [{"id": 1, "text": SECRET, "score": 0.9}]}
    result = await mcp.call_tool("recall", {"query": "son"})
    assert result["isError"] is False
    assert result["content"][0]["type"] == "text"
    assert result["structuredContent"] == use_cases.payload
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    assert use_cases.calls == [("Recall", user_id, Recall.parse({"query": "son"}, Settings()))]


async def test_service_error_is_a_tool_error_not_a_protocol_error(
    mcp: Mcp, use_cases: FakeUseCases
) -> None:
    use_cases.error = MemoryServiceError(NOT_FOUND, "Memory 9 not found.")
    result = await mcp.call_tool("get_memory", {"id": 9})
    assert result["isError"] is True
    payload = result["structuredContent"]
    assert payload == {
        "ok": False,
        "error": {"code": "NOT_FOUND", "message": "Memory 9 not found."},
    }
    assert json.loads(result["content"][0]["text"]) == payload


async def test_ok_false_payload_sets_is_error(mcp: Mcp, use_cases: FakeUseCases) -> None:
    use_cases.payload = {"ok": False, "error": {"code": "INVALID_INPUT", "message": "no"}}
    result = await mcp.call_tool("count_memories", {})
    assert result["isError"] is True


async def test_unexpected_exception_is_internal_error_and_logged_without_arguments(
    mcp: Mcp, use_cases: FakeUseCases, caplog: pytest.LogCaptureFixture
) -> None:
    use_cases.error = RuntimeError("boom")
    with caplog.at_level(logging.INFO):
        result = await mcp.call_tool("recall", {"query": SECRET})
    assert result["isError"] is True
    error = result["structuredContent"]["error"]
    assert error["code"] == "INTERNAL_ERROR" and "boom" not in error["message"]
    failures = [r for r in caplog.records if r.exc_info]
    assert failures and "recall" in failures[0].getMessage()
    assert SECRET not in caplog.text


async def test_non_payload_return_is_internal_error(mcp: Mcp, use_cases: FakeUseCases) -> None:
    use_cases.payload = {"matches": []}  # no "ok"
    result = await mcp.call_tool("recall", {"query": "x"})
    assert result["structuredContent"]["error"]["code"] == "INTERNAL_ERROR"


async def test_timeout_is_reported_as_maybe_done(mcp: Mcp, write_queue: FakeWriteQueue) -> None:
    write_queue.error = TimeoutError()
    result = await mcp.call_tool("confirm", {"id": 1})
    assert result["isError"] is True
    assert "may still complete" in result["structuredContent"]["error"]["message"]


async def test_missing_arguments_become_empty_object(mcp: Mcp, use_cases: FakeUseCases) -> None:
    await mcp.call_tool("memory_stats")
    assert use_cases.calls[0][2] == MemoryStats()


async def test_unknown_tool_is_32602(mcp: Mcp) -> None:
    result = await mcp.request("tools/call", {"name": "teleport", "arguments": {}}, id=3)
    assert result.status_code == 200
    assert result.json["id"] == 3
    assert result.json["error"]["code"] == -32602
    assert "teleport" in result.json["error"]["message"]


@pytest.mark.parametrize(
    "params",
    [
        {"name": "recall", "arguments": [1]},
        {"name": "recall", "arguments": "q"},
        {"arguments": {}},
        {"name": 5},
    ],
)
async def test_bad_call_params_are_32602(mcp: Mcp, params: dict) -> None:
    result = await mcp.request("tools/call", params)
    assert result.json["error"]["code"] == -32602


async def test_queued_tools_go_through_the_write_queue(
    mcp: Mcp, write_queue: FakeWriteQueue, use_cases: FakeUseCases, user_id: int
) -> None:
    write_queue.payload = {"ok": True, "memory_id": 12, "message": "Ok"}
    result = await mcp.call_tool("remember", {"text": SECRET})
    assert result["structuredContent"] == write_queue.payload and result["isError"] is False
    assert use_cases.calls == []
    ((use_case, uid, args, key),) = write_queue.calls
    # The queue carries the command parsed here, as JSON, not the raw arguments.
    assert (use_case, uid) == ("remember", user_id)
    assert isinstance(args, dict) and args["command"] == "Remember"
    command = from_json(args)
    assert isinstance(command, Remember) and command.item.text == SECRET
    assert command.to_json() == args
    assert len(key) >= 32


async def test_queue_service_error_is_a_tool_error(mcp: Mcp, write_queue: FakeWriteQueue) -> None:
    write_queue.error = MemoryServiceError("SECRET_REJECTED", "That looks like an API key.")
    result = await mcp.call_tool("remember", {"text": "sk-..."})
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["code"] == "SECRET_REJECTED"


# --- idempotency keys ------------------------------------------------------------------


async def test_a_retry_in_the_same_session_reuses_the_key(
    mcp: Mcp, write_queue: FakeWriteQueue
) -> None:
    s1, s2 = await open_session(mcp), await open_session(mcp)
    for _ in range(2):
        await mcp.call_tool("remember", {"text": SECRET, "tags": ["a"]}, mcp_session_id=s1)
    # Same arguments in another key order: still the same request.
    await mcp.call_tool("remember", {"tags": ["a"], "text": SECRET}, mcp_session_id=s1)
    await mcp.call_tool("remember", {"text": SECRET, "tags": ["a"]}, mcp_session_id=s2)
    keys = [call[3] for call in write_queue.calls]
    assert keys[0] == keys[1] == keys[2] and keys[3] != keys[0]


async def test_without_session_each_call_gets_a_fresh_key(
    mcp: Mcp, write_queue: FakeWriteQueue
) -> None:
    await mcp.call_tool("confirm", {"id": 1})
    await mcp.call_tool("confirm", {"id": 1})
    assert write_queue.calls[0][3] != write_queue.calls[1][3]


async def test_idempotency_key_header_wins(mcp: Mcp, write_queue: FakeWriteQueue) -> None:
    a, b = await open_session(mcp), await open_session(mcp)
    await mcp.call_tool("forget", {"id": 1}, idempotency_key="op-1", mcp_session_id=a)
    await mcp.call_tool("forget", {"id": 1}, idempotency_key="op-1", mcp_session_id=b)
    await mcp.call_tool("forget", {"id": 1}, idempotency_key="op-2")
    # The same key with other arguments is another operation, not the first one's answer.
    await mcp.call_tool("forget", {"id": 1, "reason": "x"}, idempotency_key="op-1")
    keys = [call[3] for call in write_queue.calls]
    assert keys[0] == keys[1]
    assert len({keys[0], keys[2], keys[3]}) == 3


def test_idempotency_key_depends_on_user_tool_and_request_id() -> None:
    base = dict(session_id="s", request_id=1, header=None)
    key = idempotency_key(1, "remember", {"text": "a"}, **base)
    assert key == idempotency_key(1, "remember", {"text": "a"}, **base)
    assert key != idempotency_key(2, "remember", {"text": "a"}, **base)
    assert key != idempotency_key(1, "remember_batch", {"text": "a"}, **base)
    assert key != idempotency_key(1, "remember", {"text": "a"}, **{**base, "request_id": 2})
    assert key != idempotency_key(1, "remember", {"text": "a"}, **{**base, "request_id": "1"})
    header = dict(session_id=None, request_id=None, header="h")
    assert idempotency_key(1, "forget", {}, **header) != idempotency_key(2, "forget", {}, **header)
