"""memory.commands: parsing refuses what the tools refuse; the JSON round trip is exact."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from api.mcp.tools import tool_specs
from config.settings import Settings
from memory.commands import ForgetBatch, Recall, RememberBatch, UpdateMemory, from_json
from memory.errors import MemoryServiceError
from tests.tool_calls import COMMAND_OF, parse_command
from tests.tool_samples import sample_arguments

SETTINGS = Settings(max_batch_size=6)

#: Arguments that parse, with every kind of value a command holds (hand-picked; a tool
#: without an entry is checked with its sample, ``tests.tool_samples``).
VALID = {
    "remember": {
        "text": "My son Colby lives in Los Angeles.",
        "tags": ["Family", "la"],
        "importance": 0.7,
        "expires_at": "2099-01-01T00:00:00Z",
        "last_confirmed_at": "2026-01-01T10:30:00.123456+02:00",
        "valid_to": "2030-01-01T00:00:00Z",
        "reference_time": "2023-05-10T15:00:00Z",
        "supersedes": [3, 3, 4],
        "keep": True,
    },
    "remember_batch": {
        "items": [{"text": "I like tea."}, {"text": ""}, {"text": "x", "tagz": []}],
        "dedup_policy": "insert",
        "source_provider": "claude",
    },
    "update_memory": {
        "id": 7,
        "expires_at": None,
        "occurred_at": None,
        "valid_from": "2020-01-01T00:00:00Z",
        "tags": [],
        "dry_run": True,
    },
    "update_memory_batch": {
        "items": [{"id": 1, "text": "I live in Oslo."}, {"id": 2}, "nope"],
        "dry_run": False,
    },
    "confirm": {"id": 9},
    "forget": {"id": 4, "reason": "moved", "replaced_by_id": 5},
    "forget_batch": {"ids": [1, "two", {"type": "datetime", "value": 1}, [3], None, 2.0]},
    "reinforce": {"memory_ids": [2, 1, 2], "delta": -0.5, "query": "tea?"},
    "find_near_duplicates": {"threshold": 0.95},
    "find_conflicts": {"max_groups": 5},
    "recall": {"query": "where", "tags": ["Family"], "as_of": "2024-03-01T10:00:00+01:00"},
    "search_memory": {"query": "where", "limit": 3, "explain": True},
    "build_context_prompt": {"user_prompt": "hi", "max_chars": 500, "min_score": 0.2},
    "list_memories": {"limit": 5, "offset": 2, "not_confirmed_since": "2020-01-01T00:00:00Z"},
    "text_search": {"text": "Colby"},
    "get_memory": {"id": 4},
    "count_memories": {"tags": ["la"], "source_provider": "claude", "untagged_only": False},
    "memory_stats": {},
    "list_tags": {"include_deleted": True, "limit": 9},
    "export_memories": {"include_deleted": False},
    "query_relations": {"entity": "my manager", "max_hops": 3},
}


def test_the_hand_picked_cases_name_registered_tools() -> None:
    assert set(VALID) <= set(COMMAND_OF)


@pytest.mark.parametrize("tool", list(COMMAND_OF))
def test_the_json_round_trip_gives_back_the_same_command(tool: str) -> None:
    arguments = VALID.get(tool) or sample_arguments(tool_specs(SETTINGS)[tool], 1)
    command = parse_command(tool, arguments, SETTINGS)
    wire = json.loads(json.dumps(command.to_json()))  # what Dramatiq's JSON encoder carries
    assert wire["command"] == COMMAND_OF[tool].type_name()  # its type, never the tool name
    back = from_json(wire)
    assert type(back) is type(command)
    assert back.to_json() == command.to_json()
    if not any(
        isinstance(v, tuple) and any(isinstance(x, Exception) for x in v)
        for v in vars(command).values()
    ):
        assert back == command  # exceptions compare by identity; the rest by value


def test_typed_values_come_back_typed() -> None:
    command = from_json(
        json.loads(json.dumps(parse_command("remember", VALID["remember"], SETTINGS).to_json()))
    )
    item = command.item  # type: ignore[attr-defined]
    assert item.expires_at == datetime(2099, 1, 1, tzinfo=UTC)
    assert item.last_confirmed_at == datetime(2026, 1, 1, 8, 30, 0, 123456, tzinfo=UTC)
    assert item.supersedes == (3, 4) and isinstance(item.tags, list)
    update = from_json(
        json.loads(
            json.dumps(parse_command("update_memory", VALID["update_memory"], SETTINGS).to_json())
        )
    )
    assert isinstance(update, UpdateMemory)
    assert update.request.changes == {
        "expires_at": None,
        "tags": [],
        "occurred_at": None,
        "valid_from": datetime(2020, 1, 1, tzinfo=UTC),
    }
    assert update.dry_run
    assert item.valid_to == datetime(2030, 1, 1, tzinfo=UTC) and item.occurred_at is None


def test_a_remember_queued_before_event_time_existed_still_decodes() -> None:
    command = parse_command(
        "remember", {**VALID["remember"], "occurred_at": "2023-05-07T00:00:00Z"}, SETTINGS
    )
    data = json.loads(json.dumps(command.to_json()))
    for name in ("occurred_at", "valid_from", "valid_to", "occurred_at_parsed"):
        del data["item"]["fields"][name]
    old = from_json(data)
    assert old.item.occurred_at is None and old.item.occurred_at_parsed is False  # type: ignore[attr-defined]
    assert old.item.text == command.item.text  # type: ignore[attr-defined]


def test_a_bad_batch_item_stays_in_its_place_as_its_error() -> None:
    batch = from_json(
        json.loads(
            json.dumps(parse_command("remember_batch", VALID["remember_batch"], SETTINGS).to_json())
        )
    )
    assert isinstance(batch, RememberBatch)
    ok, empty, unknown = batch.items
    assert not isinstance(ok, Exception) and ok.source_provider == "claude"
    assert isinstance(empty, MemoryServiceError) and empty.code == "INVALID_INPUT"
    assert isinstance(unknown, MemoryServiceError) and unknown.detail == {
        "field": "tagz",
        "suggestion": "tags",
    }


def test_forget_batch_echoes_the_entries_as_sent() -> None:
    raw = VALID["forget_batch"]["ids"]
    batch = from_json(
        json.loads(
            json.dumps(parse_command("forget_batch", VALID["forget_batch"], SETTINGS).to_json())
        )
    )
    assert isinstance(batch, ForgetBatch)
    assert list(batch.sent) == raw  # a client's object that looks like a tag is still its object
    assert [i if isinstance(i, int) else "error" for i in batch.ids] == [
        1,
        "error",
        "error",
        "error",
        "error",
        2,
    ]


@pytest.mark.parametrize(
    ("tool", "raw", "code", "field"),
    [
        ("remember", {"text": ""}, "INVALID_INPUT", "text"),
        ("remember", {"text": "x", "tagz": []}, "INVALID_INPUT", "tagz"),
        ("remember_batch", {"items": [{"text": "a"}] * 7}, "INVALID_INPUT", "items"),
        ("forget_batch", {"ids": list(range(1, 8))}, "LIMIT_EXCEEDED", "ids"),
        ("update_memory_batch", {"items": []}, "INVALID_INPUT", "items"),
        ("forget", {"id": 3, "replaced_by_id": 3}, "INVALID_INPUT", "replaced_by_id"),
        ("reinforce", {"memory_ids": [0]}, "INVALID_INPUT", "memory_ids"),
        ("find_conflicts", {"max_groups": 501}, "INVALID_INPUT", "max_groups"),
    ],
)
def test_parsing_refuses_with_the_tools_errors(tool: str, raw: dict, code: str, field: str) -> None:
    with pytest.raises(MemoryServiceError) as info:
        parse_command(tool, raw, SETTINGS)
    assert info.value.code == code and (info.value.detail or {}).get("field") == field


def test_json_tagged_by_a_tool_name_is_not_a_command() -> None:
    wire = parse_command("confirm", {"id": 1}, SETTINGS).to_json()
    with pytest.raises(ValueError):
        from_json({**wire, "command": "confirm"})
    assert from_json(wire) == parse_command("confirm", {"id": 1}, SETTINGS)


def test_recall_and_search_memory_are_one_command() -> None:
    assert parse_command("recall", {"query": "q"}, SETTINGS) == parse_command(
        "search_memory", {"query": "q"}, SETTINGS
    )
    assert isinstance(parse_command("search_memory", {"query": "q"}, SETTINGS), Recall)
