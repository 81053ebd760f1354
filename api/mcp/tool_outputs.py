"""Every tool's ``outputSchema``: one object schema its success and error payloads both meet.

MCP 2026-07-28 (Tools, "Output Schema") allows any JSON Schema 2020-12 and
asks clients to validate ``structuredContent`` against it; through 2025-11-25
the root must be ``"type": "object"``. Every payload is an object with ``ok``:
on success the tool's fields, on failure the tools chapter's error
(``ok: false``, ``error{code, message}`` and maybe ``detail``, "Error
codes"). So each tool's schema is

    {"type": "object", "properties": {<the tool's fields>}}

Schema decisions:

- ``ok`` is not named: every payload has it (``tests/api/test_output_schemas.py``
  checks), and naming it in 21 schemas costs the 357 bytes ``tools/list`` does
  not have under 16 KB.
- One flat object, not ``anyOf: [success, error]``. The branches repeat
  ``ok`` and the error object in all 21 tools: 1.7 KB more of ``tools/list``
  (at most 16 KB, issue 14), bought from the descriptions a model needs.
  Issue 27 took the ``error`` branch out as well (``{"required": ["code",
  "message"]}`` in every schema, 819 bytes): every tool now has a title and
  explicit hints, and ``tools/list`` stays under 16 KB. An error payload still
  meets every schema (open objects); ``isError`` and the payload's ``ok: false``
  say it failed, and the tools chapter says the error's shape.
- Open objects (no ``additionalProperties: false``). A client that validates
  turns a result that does not match into a failure of the call (the official
  SDK raises), so a schema must never be stricter than the payloads
  ``memory.handlers`` return: a field added there must not break every client
  until the schema catches up. ``tests/api/test_output_schemas.py`` holds the
  schemas to real results of every tool.
- Terse: the fields a model reads, typed; a nested object by the fields every
  one of them has (``required``, untyped: the names cost least); no
  descriptions (the tool's description says what the fields mean).
"""

from __future__ import annotations

from typing import Any

INT: dict[str, Any] = {"type": "integer"}
STR: dict[str, Any] = {"type": "string"}
BOOL: dict[str, Any] = {"type": "boolean"}


def keys(*names: str) -> dict[str, Any]:
    """An array of objects that all have ``names``."""
    return {"type": "array", "items": {"required": list(names)}}


def result(**fields: dict[str, Any]) -> dict[str, Any]:
    """A tool's outputSchema: the success ``fields`` (an error payload meets it too)."""
    return {"type": "object", "properties": fields}


#: recall's and the listings' rows (``memory.shapes``); the other fields pass unnamed.
ROWS = keys("id", "text")
#: update_memory_batch's and forget_batch's payload: each item's outcome and where it was.
BATCH = result(results=keys("ok"))


def scan_result(*, with_reason: bool) -> dict[str, Any]:
    """find_near_duplicates' and find_conflicts' payload (``memory.scans``)."""
    group: dict[str, Any] = {"required": ["ids", "memories"]}
    if with_reason:
        # Why a group's memories may conflict (the use case adds it).
        group["properties"] = {"reason": {"type": "string", "enum": ["similarity", "relation"]}}
    return result(groups={"type": "array", "items": group})
