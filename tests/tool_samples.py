"""Per-tool test data, in one place: what the registry-wide checks call each tool with.

Every check that must cover each tool takes its tools from the registry
(``api.mcp.tools.tool_specs``): bad input, unknown arguments, output schemas,
isolation, replica routing, the listing snapshot and the shard-ready
statements. Their arguments come from here, so a new tool is tested by all of
them without an edit to any of them (docs/adding-a-tool.md):

- :func:`sample_arguments`: a call that succeeds on a store holding one memory
  of the caller. Derived from the input schema (the required properties, each
  with a plain value of its type) unless :data:`SAMPLES` has an entry: a tool
  whose derived call cannot succeed (it must be given a real memory id, or a
  value its schema cannot say) gets one there, with :data:`MEMORY` where the
  caller's memory id goes. A tool whose sample fails makes the checks fail,
  naming it and this table.
- :func:`bad_arguments`: calls the schema itself refuses, each with the
  property it breaks: a value of the wrong type, one below the minimum, an empty
  array under minItems, a required property left out. Every one must be
  answered INVALID_INPUT naming the property, with nothing changed.
- :func:`misspelt`: a call with one property misspelt: the API refuses any
  name its schema does not declare (``tests/api/test_unknown_arguments.py``).
- :func:`in_run_order`: every tool in an order one store survives: the reads,
  then the writes that keep the memory, then those that may delete it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from api.mcp.tool_spec import ToolSpec


class _Memory:
    def __repr__(self) -> str:
        return "MEMORY"


#: Where a sample puts the id of one of the caller's memories.
MEMORY: Any = _Memory()

#: The tools whose call derived from the schema would not succeed (ids, or a real change)
#: or would leave their interesting path untried.
SAMPLES: dict[str, dict[str, Any]] = {
    "get_memory": {"id": MEMORY},
    "update_memory": {"id": MEMORY, "text": "My sister Ana lives in Braga."},
    "update_memory_batch": {"items": [{"id": MEMORY, "importance": 0.9}]},
    "confirm": {"id": MEMORY},
    "forget": {"id": MEMORY, "reason": "test"},
    "forget_batch": {"ids": [MEMORY]},
    "reinforce": {"memory_ids": [MEMORY], "query": "what does Ana do"},
    # Names someone, so that the hop over the relations runs (the shard-ready check).
    "query_relations": {"entity": "Ana"},
}

#: A plain value of each JSON type, for a derived sample.
_PLAIN: dict[str, Any] = {
    "string": "kites",
    "integer": 1,
    "number": 0.5,
    "boolean": False,
    "null": None,
}
#: A value of another type, for each declared type (never one JSON Schema would accept).
_WRONG_TYPE: dict[str, Any] = {
    "string": 5,
    "integer": "1",
    "number": "0.5",
    "boolean": "yes",
    "array": "x",
    "object": 1,
}


def sample_arguments(spec: ToolSpec, memory_id: int) -> dict[str, Any]:
    """A call of ``spec`` that succeeds on a store holding the caller's memory ``memory_id``."""
    sample = SAMPLES.get(spec.name)
    if sample is None:
        sample = _value(spec.input_schema)
    return _with_memory(sample, memory_id)  # type: ignore[no-any-return]


def bad_arguments(spec: ToolSpec, memory_id: int) -> list[tuple[str, dict[str, Any]]]:
    """(property, arguments) the schema refuses, each breaking one property of the sample."""
    base = sample_arguments(spec, memory_id)
    schema = spec.input_schema
    cases: list[tuple[str, dict[str, Any]]] = []
    for name, prop in schema.get("properties", {}).items():
        types = prop.get("type")
        first = types[0] if isinstance(types, list) else types
        if first in _WRONG_TYPE:
            cases.append((name, {**base, name: _WRONG_TYPE[first]}))
        if first in ("integer", "number") and "minimum" in prop:
            cases.append((name, {**base, name: prop["minimum"] - 1}))
        if first == "array" and prop.get("minItems", 0) >= 1:
            cases.append((name, {**base, name: []}))
    for name in schema.get("required", []):
        cases.append((name, {k: v for k, v in base.items() if k != name}))
    return cases


def misspelt(spec: ToolSpec, memory_id: int) -> tuple[dict[str, Any], str, str | None]:
    """(arguments, the misspelt name, the property it misspells or None) for ``spec``."""
    base = sample_arguments(spec, memory_id)
    names = list(spec.input_schema.get("properties", {}))
    if not names:
        return {**base, "verbose": True}, "verbose", None
    meant = names[0]
    wrong = meant[:-1] if len(meant) > 3 else meant + "x"
    return (
        {**base, wrong: base.get(meant, _value(spec.input_schema["properties"][meant]))},
        (wrong),
        meant,
    )


def in_run_order(specs: Iterable[ToolSpec]) -> list[ToolSpec]:
    """The reads, then the writes that keep what they touch, then those that may delete it."""
    return sorted(specs, key=lambda s: (not s.read_only, s.destructive))


def _value(schema: dict[str, Any]) -> Any:
    """A plain value ``schema`` accepts: its default, first enum value, or minimum."""
    if "enum" in schema:
        return schema["enum"][0]
    types = schema.get("type")
    kind = types[0] if isinstance(types, list) else types
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: _value(properties[name]) for name in schema.get("required", [])}
    if kind == "array":
        return [_value(schema.get("items", {"type": "string"}))] * max(1, schema.get("minItems", 1))
    if "default" in schema:
        return schema["default"]
    if schema.get("format") == "date-time":
        return "2020-01-01T00:00:00Z"
    if kind in ("integer", "number") and "minimum" in schema:
        return schema["minimum"]
    if kind not in _PLAIN:
        raise ValueError(f"no plain value for {schema}: give the tool an entry in SAMPLES")
    return _PLAIN[kind]


def _with_memory(value: Any, memory_id: int) -> Any:
    if value is MEMORY:
        return memory_id
    if isinstance(value, dict):
        return {k: _with_memory(v, memory_id) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_memory(v, memory_id) for v in value]
    return value
