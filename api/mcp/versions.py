"""What differs between the MCP revisions we serve, in one table.

Pure: no HTTP library, no I/O. Everything else (``dispatch``, ``resource``,
a stdio transport) asks :func:`rules_for` and reads the answer; no other
module compares version strings.

Two eras (MCP 2026-07-28, Basic, "Versioning"):

- **modern** (2026-07-28): stateless. Every request carries its version and
  the client's capabilities in ``params._meta``; there is no ``initialize``,
  no session, no ``ping`` and no ``logging/setLevel``; every result carries
  ``resultType`` and our ``serverInfo`` in ``_meta``; list results carry
  caching hints; on Streamable HTTP the ``Mcp-Method``/``Mcp-Name`` headers
  are required and must match the body.
- **legacy** (2025-11-25, 2025-06-18, 2025-03-26): ``initialize`` opens the
  connection (on HTTP, an ``Mcp-Session-Id``). A request that names no
  version at all is served as 2025-03-26 (Streamable HTTP, "Protocol Version
  Header": a server MAY assume it when the header is missing), which is the
  one revision with JSON-RPC batches.

How a request's version is found: ``params._meta["io.modelcontextprotocol/
protocolVersion"]`` when present (a request carrying modern ``_meta`` is
served statelessly, whatever came before), else what the transport knows
(the ``MCP-Protocol-Version`` header on HTTP, the negotiated version of an
initialised stdio connection), else none. On HTTP the header and ``_meta``
must agree (:func:`check_http_headers`).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from api.mcp.jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    JsonRpcError,
    Message,
)

MODERN_VERSION = "2026-07-28"
#: Every revision we speak, newest first.
SUPPORTED_VERSIONS = (MODERN_VERSION, "2025-11-25", "2025-06-18", "2025-03-26")
#: The revisions that start with ``initialize``, newest first.
HANDSHAKE_VERSIONS = SUPPORTED_VERSIONS[1:]
#: What ``initialize`` offers when the client asks for a version it cannot have.
LATEST_HANDSHAKE_VERSION = HANDSHAKE_VERSIONS[0]

#: Reserved ``_meta`` keys (MCP 2026-07-28, Basic, "_meta").
PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"

#: Method -> the params member mirrored in ``Mcp-Name`` (Streamable HTTP, "Standard Request Headers").
NAME_BEARING = MappingProxyType(
    {"tools/call": "name", "resources/read": "uri", "prompts/get": "name"}
)

#: HTTP status of a modern JSON-RPC error by code (Streamable HTTP, "Protocol
#: Version Header" and "Server Validation"); any other code is answered 200.
_MODERN_ERROR_STATUS = MappingProxyType(
    {
        PARSE_ERROR: 400,
        INVALID_REQUEST: 400,
        INVALID_PARAMS: 400,
        HEADER_MISMATCH: 400,
        UNSUPPORTED_PROTOCOL_VERSION: 400,
        METHOD_NOT_FOUND: 404,
    }
)


@dataclass(frozen=True)
class ProtocolRules:
    """How one protocol revision behaves where revisions differ."""

    #: The revision; None for a request that named none (served as 2025-03-26).
    version: str | None
    #: Version and client capabilities come in every request's ``params._meta``.
    per_request_meta: bool
    #: ``initialize`` exists (and, on HTTP, hands out an ``Mcp-Session-Id``).
    has_initialize: bool
    #: Streamable HTTP sessions: ``Mcp-Session-Id`` is checked, DELETE ends one.
    sessions: bool
    #: ``ping`` is a method.
    has_ping: bool
    #: A POST body may be a JSON-RPC batch.
    batches: bool
    #: Streamable HTTP: ``Mcp-Method`` (and ``Mcp-Name``) required, checked against the body.
    method_headers: bool
    #: Every result's ``resultType``; None: the field does not exist.
    result_type: str | None
    #: Results carry ``io.modelcontextprotocol/serverInfo`` in ``_meta``.
    server_info_in_meta: bool
    #: ``tools/list`` (and ``server/discover``) carry ``ttlMs`` and ``cacheScope``.
    cache_hints: bool

    def http_status(self, error_code: int) -> int:
        """The HTTP status a JSON-RPC error response of this revision goes out with."""
        if not self.per_request_meta:
            return 200
        return _MODERN_ERROR_STATUS.get(error_code, 200)

    def decorate(self, result: dict[str, Any], server_info: Mapping[str, Any]) -> dict[str, Any]:
        """A result as this revision sends it: ``resultType`` and ``_meta.serverInfo`` added."""
        if self.result_type is None and not self.server_info_in_meta:
            return result
        out = dict(result)
        if self.result_type is not None:
            out["resultType"] = self.result_type
        if self.server_info_in_meta:
            meta = out.get("_meta")
            out["_meta"] = {
                **(meta if isinstance(meta, dict) else {}),
                SERVER_INFO_KEY: server_info,
            }
        return out


_LEGACY = ProtocolRules(
    version=None,
    per_request_meta=False,
    has_initialize=True,
    sessions=True,
    has_ping=True,
    batches=False,
    method_headers=False,
    result_type=None,
    server_info_in_meta=False,
    cache_hints=False,
)

_RULES: Mapping[str, ProtocolRules] = MappingProxyType(
    {
        MODERN_VERSION: ProtocolRules(
            version=MODERN_VERSION,
            per_request_meta=True,
            has_initialize=False,
            sessions=False,
            has_ping=False,
            batches=False,
            method_headers=True,
            result_type="complete",
            server_info_in_meta=True,
            cache_hints=True,
        ),
        "2025-11-25": replace(_LEGACY, version="2025-11-25"),
        "2025-06-18": replace(_LEGACY, version="2025-06-18"),
        # 2025-06-18 removed batches; 2025-03-26 still has them.
        "2025-03-26": replace(_LEGACY, version="2025-03-26", batches=True),
    }
)
#: A request that names no version (older clients, and every ``initialize``).
UNVERSIONED = replace(_LEGACY, batches=True)


def rules_for(version: str | None) -> ProtocolRules:
    """The rules of ``version``; raises UnsupportedProtocolVersionError (-32022) for one we lack."""
    if version is None:
        return UNVERSIONED
    rules = _RULES.get(version)
    if rules is None:
        raise unsupported_version(version)
    return rules


def unsupported_version(requested: str) -> JsonRpcError:
    """-32022 with ``data = {supported, requested}`` (MCP 2026-07-28, Basic, "Versioning")."""
    supported = ", ".join(SUPPORTED_VERSIONS)
    return JsonRpcError(
        UNSUPPORTED_PROTOCOL_VERSION,
        f"Unsupported protocol version {requested!r}; supported: {supported}.",
        {"supported": list(SUPPORTED_VERSIONS), "requested": requested},
    )


def meta_of(params: Any) -> dict[str, Any] | None:
    """``params._meta`` when it is an object."""
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    return meta if isinstance(meta, dict) else None


def meta_version(params: Any) -> object | None:
    """The raw ``_meta`` protocol version of a request, or None when it names none."""
    meta = meta_of(params)
    return None if meta is None else meta.get(PROTOCOL_VERSION_KEY)


def request_rules(params: Any, transport_version: str | None) -> ProtocolRules:
    """The rules one request is served by: its ``_meta`` version, else the transport's.

    Raises -32602 for a ``_meta`` version that is not a string, -32022 for
    one we do not speak, and -32602 when a modern request lacks its client
    capabilities (MCP 2026-07-28, Basic, "Per-request protocol fields").
    """
    declared = meta_version(params)
    if declared is not None and not isinstance(declared, str):
        raise JsonRpcError(
            INVALID_PARAMS, f"Invalid params: _meta[{PROTOCOL_VERSION_KEY!r}] must be a string."
        )
    rules = rules_for(declared if declared is not None else transport_version)
    if rules.per_request_meta:
        meta = meta_of(params)
        if meta is None or PROTOCOL_VERSION_KEY not in meta:
            raise JsonRpcError(
                INVALID_PARAMS,
                f"Invalid params: protocol {rules.version} needs params._meta with "
                f"{PROTOCOL_VERSION_KEY!r} and {CLIENT_CAPABILITIES_KEY!r}.",
            )
        if not isinstance(meta.get(CLIENT_CAPABILITIES_KEY), dict):
            raise JsonRpcError(
                INVALID_PARAMS,
                f"Invalid params: _meta[{CLIENT_CAPABILITIES_KEY!r}] must be an object.",
            )
    return rules


def http_version(header: str | None, message: Message) -> str | None:
    """The version of one HTTP request from its ``MCP-Protocol-Version`` header and body.

    Raises -32022 for a header naming a version we lack, and HeaderMismatch
    (-32020) when the body's ``_meta`` names a version and the header is
    missing or says another (Streamable HTTP, "Protocol Version Header").
    """
    if header is not None:
        rules_for(header)  # raises for an unsupported one
    declared = meta_version(message.params)
    if declared is None:
        return header
    if header is None:
        raise _mismatch("the MCP-Protocol-Version header is missing")
    if declared != header:
        raise _mismatch(
            f"MCP-Protocol-Version header {header!r} does not match the body's "
            f"_meta[{PROTOCOL_VERSION_KEY!r}] {declared!r}"
        )
    return header


def check_http_headers(
    rules: ProtocolRules, message: Message, method_header: str | None, name_header: str | None
) -> None:
    """``Mcp-Method`` and ``Mcp-Name`` against the body, for a revision that requires them.

    Raises HeaderMismatch (-32020) for a missing, malformed or different value.
    ``Mcp-Name`` may carry the ``=?base64?...?=`` form (Streamable HTTP,
    "Value Encoding"), decoded before comparing.
    """
    if not rules.method_headers or message.kind != "request":
        return
    if method_header is None:
        raise _mismatch("the Mcp-Method header is missing")
    if method_header != message.method:
        raise _mismatch(
            f"Mcp-Method header {method_header!r} does not match the body's method {message.method!r}"
        )
    key = NAME_BEARING.get(message.method or "")
    if key is None:
        return
    body_value = message.params.get(key) if isinstance(message.params, dict) else None
    if body_value is None:
        return  # the method itself will refuse the missing name
    if name_header is None:
        raise _mismatch("the Mcp-Name header is missing")
    decoded = decode_header_value(name_header)
    if decoded is None:
        raise _mismatch("the Mcp-Name header is not a valid header value")
    if decoded != body_value:
        raise _mismatch(
            f"Mcp-Name header {decoded!r} does not match the body's {key} {body_value!r}"
        )


# Anything of this shape is the encoded form (clients encode a plain value that looks like it).
_SENTINEL = re.compile(r"^=\?base64\?(?P<payload>.*)\?=$")
_HEADER_SAFE = re.compile(r"^[\x20-\x7e\t]*$")


def decode_header_value(value: str) -> str | None:
    """A mirrored header value as text: plain visible ASCII, or the base64 sentinel form.

    None when it is neither (control characters, bad base64, not UTF-8).
    """
    if not _HEADER_SAFE.match(value):
        return None
    found = _SENTINEL.match(value)
    if found is None:
        return value
    try:
        return base64.b64decode(found["payload"], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _mismatch(detail: str) -> JsonRpcError:
    return JsonRpcError(HEADER_MISMATCH, f"Header mismatch: {detail}.")
