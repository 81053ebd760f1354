"""Unit tests for memory.rules.inputs.reject_unknown and its agreement with the tool schemas."""

from __future__ import annotations

import pytest

from api.mcp.tools import tool_specs
from config.settings import Settings
from memory.commands.editing import UPDATE_ITEM_FIELDS, UPDATE_MEMORY_FIELDS
from memory.commands.remember import ITEM_FIELDS
from memory.errors import INVALID_INPUT, MemoryServiceError
from memory.rules.inputs import reject_unknown

FORGET = {"id", "hard_delete", "reason", "replaced_by_id", "dry_run"}


def _refused(raw: dict, known: set[str]) -> MemoryServiceError:
    with pytest.raises(MemoryServiceError) as excinfo:
        reject_unknown(raw, known)
    assert excinfo.value.code == INVALID_INPUT
    return excinfo.value


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [
        ("dryRun", "dry_run"),  # case and separator differ
        ("dry-run", "dry_run"),
        ("DRY_RUN", "dry_run"),
        ("hard_delet", "hard_delete"),
        ("reasons", "reason"),
        ("replaced_by", "replaced_by_id"),
    ],
)
def test_a_close_name_is_suggested(name: str, suggestion: str) -> None:
    error = _refused({"id": 1, name: True}, FORGET)
    assert error.detail == {"field": name, "suggestion": suggestion}
    assert error.message == f"Unknown field {name!r}; did you mean {suggestion}?"


def test_a_far_name_lists_the_known_ones() -> None:
    error = _refused({"zzz": 1}, {"id", "text"})
    assert error.detail == {"field": "zzz"}
    assert error.message == "Unknown field 'zzz'; known fields: id, text."


def test_no_known_names() -> None:
    assert _refused({"x": 1}, set()).message == "Unknown field 'x'; this tool takes no arguments."


def test_the_first_unknown_name_in_the_order_sent_is_reported() -> None:
    assert _refused({"id": 1, "b_bad": 1, "a_bad": 2}, FORGET).detail["field"] == "b_bad"


def test_known_names_and_non_objects_pass() -> None:
    reject_unknown({"id": 1, "dry_run": True}, FORGET)
    reject_unknown({}, set())
    reject_unknown(None, FORGET)  # the type check is Args' business
    reject_unknown([1, 2], FORGET)


def test_a_long_name_is_cut_short() -> None:
    error = _refused({"n" * 1000: 1}, FORGET)
    assert error.detail == {"field": "n" * 60 + "..."}
    assert len(error.message) < 150


def test_the_item_parsers_know_exactly_the_schema_fields() -> None:
    # The dispatcher checks top-level names against each inputSchema; the item
    # parsers (memory/, which cannot import api/) keep their own lists, which must
    # say the same as the schemas or a documented field would be refused.
    specs = tool_specs(Settings())

    def props(schema: dict) -> set[str]:
        return set(schema["properties"])

    assert props(specs["remember"].input_schema) == ITEM_FIELDS
    batch_item = specs["remember_batch"].item_schema("items")
    assert batch_item is not None and props(batch_item) == ITEM_FIELDS
    assert props(specs["update_memory"].input_schema) == UPDATE_MEMORY_FIELDS
    update_item = specs["update_memory_batch"].item_schema("items")
    assert update_item is not None and props(update_item) == UPDATE_ITEM_FIELDS


def test_every_nested_object_schema_is_covered() -> None:
    # A new array-of-objects argument needs its item parser to refuse unknown names too.
    nested = {
        (spec.name, name)
        for spec in tool_specs(Settings()).values()
        for name in spec.argument_names
        if (spec.item_schema(name) or {}).get("type") == "object"
    }
    assert nested == {("remember_batch", "items"), ("update_memory_batch", "items")}
    for spec in tool_specs(Settings()).values():
        assert spec.input_schema["additionalProperties"] is False
        assert spec.argument_names == set(spec.input_schema["properties"])
