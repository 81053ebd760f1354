"""The JSON-RPC 2.0 envelope: parsing, classification, error codes, replies.

Pure: no HTTP, no MCP methods. ``parse_body`` turns a POST body into one
:class:`Message` (or a list of them, for a batch); ``result``/``error``
build the reply objects. Codes are those of JSON-RPC 2.0 §5.1 plus the MCP
ones we send.

MCP narrows JSON-RPC (MCP spec, Basic, "Messages"): a request ``id`` is a
string or an integer and never null, and ``params`` is an object.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

#: Invalid JSON was received (JSON-RPC 2.0 §5.1).
PARSE_ERROR = -32700
#: The JSON sent is not a valid request object.
INVALID_REQUEST = -32600
#: The method does not exist or is not available.
METHOD_NOT_FOUND = -32601
#: Invalid method parameters (MCP also uses it for an unknown tool name).
INVALID_PARAMS = -32602
#: Internal JSON-RPC error.
INTERNAL_ERROR = -32603
#: HTTP headers missing, malformed, or not matching the body (MCP 2026-07-28,
#: Streamable HTTP, "Server Validation"); sent with HTTP 400.
HEADER_MISMATCH = -32020
#: The protocol version is not supported; ``data`` = {supported, requested}
#: (MCP 2026-07-28, "Versioning"); sent with HTTP 400. The official SDK
#: clients fall back to ``initialize`` when ``supported`` lists a
#: handshake-era version and retry at a modern one otherwise.
UNSUPPORTED_PROTOCOL_VERSION = -32022
#: The Mcp-Session-Id names no open session (sent with HTTP 404); the code
#: the official TypeScript and Python SDK servers use for it.
SESSION_NOT_FOUND = -32001

RequestId = str | int
Kind = Literal["request", "notification", "response"]


class JsonRpcError(Exception):
    """A JSON-RPC error as it goes on the wire: code, message, optional data."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_object(self) -> dict[str, Any]:
        """The ``error`` member of an error response."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


@dataclass(frozen=True)
class Message:
    """One well-formed JSON-RPC message from the client."""

    kind: Kind
    id: RequestId | None = None
    method: str | None = None
    params: dict[str, Any] | list[Any] | None = None


@dataclass(frozen=True)
class Invalid:
    """A batch element that is not a valid message; answered in place."""

    id: RequestId | None
    error: JsonRpcError


def parse_body(body: bytes) -> Message | Invalid | list[Message | Invalid]:
    """Decode a POST body into one message or a batch.

    Raises :class:`JsonRpcError` with PARSE_ERROR for invalid JSON (or
    UTF-8) and INVALID_REQUEST for an empty batch. A value that is JSON but
    not a message comes back as :class:`Invalid`, keeping its id when it had
    a usable one. Batch elements are classified one by one, so one bad
    element does not spoil the others (JSON-RPC 2.0 §6).
    """
    try:
        decoded = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as ex:
        # ValueError covers bad UTF-8 and oversized integer literals too.
        raise JsonRpcError(PARSE_ERROR, "Parse error: the body is not valid JSON.") from ex
    if isinstance(decoded, list):
        if not decoded:
            raise JsonRpcError(INVALID_REQUEST, "Invalid Request: empty batch.")
        return [_classify_element(item) for item in decoded]
    return _classify_element(decoded)


def classify(obj: Any) -> Message:
    """Classify one decoded value as a request, notification or response."""
    if not isinstance(obj, dict):
        raise JsonRpcError(INVALID_REQUEST, "Invalid Request: expected a JSON-RPC object.")
    if obj.get("jsonrpc") != "2.0":
        raise JsonRpcError(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0".')
    if "method" in obj:
        method = obj["method"]
        if not isinstance(method, str) or not method:
            raise JsonRpcError(INVALID_REQUEST, 'Invalid Request: "method" must be a string.')
        params = obj.get("params")
        if params is not None and not isinstance(params, (dict, list)):
            raise JsonRpcError(INVALID_REQUEST, 'Invalid Request: "params" must be an object.')
        if "id" not in obj:
            return Message("notification", method=method, params=params)
        return Message("request", id=_request_id(obj["id"]), method=method, params=params)
    if "id" in obj and ("result" in obj) != ("error" in obj):
        return Message("response", id=obj["id"] if _valid_id(obj["id"]) else None)
    raise JsonRpcError(INVALID_REQUEST, "Invalid Request: neither a request nor a response.")


def result(request_id: RequestId | None, value: Any) -> dict[str, Any]:
    """A success response."""
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def error(request_id: RequestId | None, err: JsonRpcError) -> dict[str, Any]:
    """An error response; ``id`` is null when the request's id is unknown."""
    return {"jsonrpc": "2.0", "id": request_id, "error": err.to_object()}


def encode(reply: dict[str, Any] | list[dict[str, Any]]) -> bytes:
    """Serialise a reply as strict JSON (no NaN/Infinity, which JSON lacks).

    UTF-8 always. A lone surrogate a client sent (JSON allows ``"\\ud800"``,
    UTF-8 cannot carry it) and that the reply echoes, say in "Method not
    found", becomes U+FFFD: sent back as the ``\\ud800`` escape, it would
    make the whole reply unreadable to a strict JSON parser (RFC 8259 §8.2
    leaves such strings' behaviour unpredictable). Raises ValueError for a
    non-finite float.
    """
    text = json.dumps(reply, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    try:
        return text.encode()
    except UnicodeEncodeError:
        # Outside strings, JSON text is ASCII: every surrogate here is inside one.
        return _SURROGATE.sub("\ufffd", text).encode()


def has_lone_surrogate(value: Any) -> bool:
    """Whether any string in a decoded JSON value (keys included) holds a lone surrogate.

    ``json.loads`` joins escaped surrogate pairs into one character, so any
    code point left in U+D800..U+DFFF is unpaired: not Unicode text, and
    neither UTF-8 nor PostgreSQL can store it. Iterative, since the value may
    nest as deep as the parser allowed.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


_SURROGATE = re.compile("[\ud800-\udfff]")


def _classify_element(item: Any) -> Message | Invalid:
    try:
        return classify(item)
    except JsonRpcError as ex:
        raw_id = item.get("id") if isinstance(item, dict) else None
        return Invalid(raw_id if _valid_id(raw_id) else None, ex)


def _valid_id(value: Any) -> bool:
    # bool is an int subclass in Python, but true/false are not ids. A string
    # with a lone surrogate is not Unicode text: it could not be echoed as sent
    # nor used in a write's idempotency key, so it is no id either.
    if isinstance(value, str):
        return not _SURROGATE.search(value)
    return isinstance(value, int) and not isinstance(value, bool)


def _request_id(value: Any) -> RequestId:
    if not _valid_id(value):
        # MCP, Basic "Requests": the id MUST be a string or integer, not null.
        raise JsonRpcError(
            INVALID_REQUEST, 'Invalid Request: "id" must be a string (valid Unicode) or an integer.'
        )
    return value  # type: ignore[no-any-return]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
