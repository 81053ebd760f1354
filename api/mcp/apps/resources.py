"""``resources/list`` and ``resources/read``: the ``ui://`` pages, for hosts with MCP Apps.

MCP, Resources: a listing of ``Resource`` objects (one page holds them all: no
``nextCursor``), and a read answering ``contents`` with the page's text. MCP
Apps, "UI Resource Format": ``mimeType`` is ``text/html;profile=mcp-app``; the
``_meta.ui`` of the content asks for the host's border and declares no
``csp`` domains, so the host applies its restrictive default (the pages need
no network). An unknown URI is "resource not found": -32002 on the handshake
revisions, -32602 at 2026-07-28 (Basic, "Error Codes": -32002 was replaced).
"""

from __future__ import annotations

from typing import Any

from api.mcp.apps.extension import APP_MIME_TYPE
from api.mcp.apps.pages import PAGES, page_html
from api.mcp.jsonrpc import INVALID_PARAMS, JsonRpcError

#: MCP 2025-11-25 and earlier, Resources, "Error Handling": resource not found.
RESOURCE_NOT_FOUND = -32002


def list_result() -> dict[str, Any]:
    """``ListResourcesResult``: every page."""
    return {"resources": [page.listing() for page in PAGES]}


def read_result(params: dict[str, Any], *, modern: bool) -> dict[str, Any]:
    """``ReadResourceResult`` of one page; raises the revision's not-found error."""
    uri = params.get("uri")
    if not isinstance(uri, str):
        raise JsonRpcError(INVALID_PARAMS, "Invalid params: params.uri must be a resource URI.")
    html = page_html(uri)
    if html is None:
        code = INVALID_PARAMS if modern else RESOURCE_NOT_FOUND
        raise JsonRpcError(
            code, f"Resource not found: {uri!r}. Call resources/list for ours.", {"uri": uri}
        )
    return {
        "contents": [
            {
                "uri": uri,
                "mimeType": APP_MIME_TYPE,
                "text": html,
                "_meta": {"ui": {"prefersBorder": True}},
            }
        ]
    }


def with_page(tool: dict[str, Any], uri: str | None) -> dict[str, Any]:
    """A ``Tool`` listing with ``_meta.ui.resourceUri`` when the tool has a page."""
    if uri is None:
        return tool
    return {**tool, "_meta": {"ui": {"resourceUri": uri}}}
