"""The ``io.modelcontextprotocol/ui`` extension: who offers it, what we answer.

MCP Apps, "Client<>Server Capability Negotiation": a host offers the extension
in its capabilities (``capabilities.extensions`` of ``initialize`` on the
handshake revisions; ``_meta["io.modelcontextprotocol/clientCapabilities"]``
of every request at 2026-07-28) with the ``mimeTypes`` it renders. A server
SHOULD check that list before tying tools to UI resources; MCP 2026-07-28,
Versioning, "Extension Negotiation": when one side lacks an extension, the
other reverts to core behaviour. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

#: The extension's identifier (MCP Apps, "Extension Identifier").
UI_EXTENSION = "io.modelcontextprotocol/ui"
#: The one content type of MCP Apps' HTML pages.
APP_MIME_TYPE = "text/html;profile=mcp-app"
#: ``_meta`` key of a request carrying its client's capabilities (MCP 2026-07-28).
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"


def offers_ui(capabilities: object) -> bool:
    """Whether client ``capabilities`` offer the extension with our content type."""
    if not isinstance(capabilities, dict):
        return False
    extensions = capabilities.get("extensions")
    settings = extensions.get(UI_EXTENSION) if isinstance(extensions, dict) else None
    if not isinstance(settings, dict):
        return False
    mime_types = settings.get("mimeTypes")
    return isinstance(mime_types, list) and APP_MIME_TYPE in mime_types


def offered_at_initialize(params: dict[str, Any]) -> bool:
    """An ``initialize`` request's client offers the extension (handshake revisions)."""
    return offers_ui(params.get("capabilities"))


def offered_in_meta(params: dict[str, Any]) -> bool:
    """A 2026-07-28 request's ``_meta`` client capabilities offer the extension."""
    meta = params.get("_meta")
    return isinstance(meta, dict) and offers_ui(meta.get(CLIENT_CAPABILITIES_KEY))


def server_capabilities(base: dict[str, Any], apps: bool) -> dict[str, Any]:
    """Our capabilities for a client: ``base`` as today, plus, for a client offering the
    extension, the extension itself and ``resources`` (the pages are resources; nothing
    else is, so a client without the extension is not told of resources at all)."""
    if not apps:
        return base
    return {
        **base,
        "resources": {},
        "extensions": {UI_EXTENSION: {"mimeTypes": [APP_MIME_TYPE]}},
    }
