"""Messages between an MCP Apps page and its host, checked against the SDK's own schemas.

``vendor/ext-apps/schemas.json`` holds the ``@modelcontextprotocol/ext-apps`` package's
generated JSON Schema of its spec types (``extApps``) and the MCP core messages the pages
also exchange (``mcp``: the JSON-RPC envelope, ``ping``, ``tools/call``, cancellation),
converted from ``@modelcontextprotocol/core``'s zod schemas (vendor/ext-apps/README.md).
``problems`` walks a conversation and names every message that does not conform: its
JSON-RPC shape first, then its method's request or notification, and every response
against the result schema of the request it answers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

SCHEMAS = Path(__file__).parent / "vendor" / "ext-apps" / "schemas.json"

#: method -> (the schema of its request or notification, of its result; None for a notification)
METHODS: dict[str, tuple[str, str | None]] = {
    "ui/initialize": ("extApps:McpUiInitializeRequest", "extApps:McpUiInitializeResult"),
    "ui/resource-teardown": (
        "extApps:McpUiResourceTeardownRequest",
        "extApps:McpUiResourceTeardownResult",
    ),
    "ui/notifications/initialized": ("extApps:McpUiInitializedNotification", None),
    "ui/notifications/size-changed": ("extApps:McpUiSizeChangedNotification", None),
    "ui/notifications/tool-input": ("extApps:McpUiToolInputNotification", None),
    "ui/notifications/tool-input-partial": ("extApps:McpUiToolInputPartialNotification", None),
    "ui/notifications/tool-result": ("extApps:McpUiToolResultNotification", None),
    "ui/notifications/tool-cancelled": ("extApps:McpUiToolCancelledNotification", None),
    "ui/notifications/host-context-changed": (
        "extApps:McpUiHostContextChangedNotification",
        None,
    ),
    "ping": ("mcp:PingRequest", "mcp:EmptyResult"),
    "tools/call": ("mcp:CallToolRequest", "mcp:CallToolResult"),
    "tools/list": ("mcp:ListToolsRequest", "mcp:ListToolsResult"),
    "notifications/cancelled": ("mcp:CancelledNotification", None),
}


@cache
def _document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(SCHEMAS.read_text(encoding="utf-8"))
    _as_the_types_mean(document)
    return document


def _as_the_types_mean(node: Any) -> None:
    """Two places where schema.json, generated from zod, says less than the spec types.

    - ``McpUiStyles`` is ``Record<McpUiStyleVariableKey, string | undefined>`` ("hosts
      may provide any subset of these values", its own description), and the SDK's zod
      schema accepts keys missing; schema.json lists every key as ``required`` (a key
      whose value is undefined is absent in JSON). So a record (``propertyNames``) whose
      values may be undefined (``{}``) has no required keys.
    - ``containerDimensions`` is an intersection (``({height} | {maxHeight?}) &
      ({width} | {maxWidth?})``): schema.json makes it an ``allOf`` of closed objects
      (``additionalProperties: false``), which no object with both a height and a width
      key can pass. Inside an ``allOf`` member those objects are left open; the keys'
      own types are still checked.
    """
    if isinstance(node, dict):
        values = node.get("additionalProperties")
        if "propertyNames" in node and isinstance(values, dict) and {} in values.get("anyOf", []):
            node.pop("required", None)
        for member in node.get("allOf", []):
            for branch in member.get("anyOf", [member]):
                if branch.get("additionalProperties") is False:
                    del branch["additionalProperties"]
        for value in node.values():
            _as_the_types_mean(value)
    elif isinstance(node, list):
        for value in node:
            _as_the_types_mean(value)


def versions() -> dict[str, str]:
    """The npm packages the schemas came from, with their versions."""
    return dict(_document()["versions"])


@cache
def validator(name: str) -> Draft202012Validator:
    """``extApps:Def`` (a ``$defs`` entry of the package's schema.json) or ``mcp:Name``."""
    part, _, key = name.partition(":")
    schema = _document()["extApps"]["$defs"][key] if part == "extApps" else _document()["mcp"][key]
    return Draft202012Validator(schema)


def _errors(name: str, instance: Any) -> list[str]:
    return [f"{name}: {e.message}" for e in validator(name).iter_errors(instance)]


def problems(conversation: Iterable[tuple[str, dict[str, Any]]]) -> list[str]:
    """Every way the messages (``(sender, message)``, in order) break the schemas.

    A method the table above does not know is a problem too: the pages must not send or
    be sent anything unchecked. An error response is checked as JSON-RPC only.
    """
    found: list[str] = []
    asked: dict[tuple[str, Any], str] = {}  # (who asked, id) -> method
    checked: set[tuple[str, str]] = set()  # (schema, JSON): the same message is checked once
    for sender, message in conversation:
        where = f"{sender} {json.dumps(message)[:200]}"

        def check(schema: str, instance: Any, where: str = where) -> None:
            key = (schema, json.dumps(instance, sort_keys=True))
            if key not in checked:
                checked.add(key)
                found.extend(f"{where}: {e}" for e in _errors(schema, instance))

        if validator("mcp:JSONRPCMessage").is_valid(message) is False:
            check("mcp:JSONRPCMessage", message)
            continue
        if "method" in message:
            known = METHODS.get(message["method"])
            if known is None:
                found.append(f"{where}: no schema for this method")
                continue
            check(known[0], {k: v for k, v in message.items() if k not in ("jsonrpc", "id")})
            if "id" in message:
                asked[(sender, message["id"])] = message["method"]
            continue
        other = next(s for s in ("app", "host") if s != sender)
        method = asked.pop((other, message["id"]), None)
        if method is None:
            found.append(f"{where}: answers no request")
        elif "result" in message:
            result_schema = METHODS[method][1]
            assert result_schema is not None, method
            check(result_schema, message["result"])
    return found
