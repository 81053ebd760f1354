"""MCP Apps (``io.modelcontextprotocol/ui``) on /mcp: declared only to clients offering it.

A client without the extension sees exactly what it saw before (capabilities,
server/discover, tools/list, no resources methods, tool results); one offering
it, at ``initialize`` (its session carries it) or in a 2026-07-28 request's
``_meta``, gets the extension and ``resources`` declared, ``_meta.ui.resourceUri``
on the tools with a page, and the pages through ``resources/list`` and
``resources/read``. The pages themselves run in Chromium in
``tests/e2e/test_mcp_apps_browser.py``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from api.mcp.apps.extension import APP_MIME_TYPE, UI_EXTENSION, offers_ui
from api.mcp.apps.pages import PAGES, TOOL_PAGES, page_html
from api.mcp.dispatch import INSTRUCTIONS
from api.mcp.jsonrpc import METHOD_NOT_FOUND
from api.mcp.listings import LIST_TTL_MS
from tests.api.conftest import Mcp, open_session
from tests.api.test_protocol_2026 import META, modern
from tests.api.test_tools_snapshot import SNAPSHOT, render

UI_CAPABILITIES = {"extensions": {UI_EXTENSION: {"mimeTypes": [APP_MIME_TYPE]}}}
APPS_META = {**META, "io.modelcontextprotocol/clientCapabilities": UI_CAPABILITIES}


async def apps_session(mcp: Mcp, version: str = "2025-11-25") -> tuple[str, dict[str, Any]]:
    params = {
        "protocolVersion": version,
        "capabilities": UI_CAPABILITIES,
        "clientInfo": {"name": "host", "version": "0"},
    }
    reply = await mcp.request("initialize", params)
    assert reply.status_code == 200, reply.text
    return reply.headers["mcp-session-id"], reply.json["result"]


def test_only_clients_naming_our_content_type_offer_the_extension() -> None:
    assert offers_ui(UI_CAPABILITIES)
    for caps in (
        {},
        None,
        {"extensions": {}},
        {"extensions": {UI_EXTENSION: {}}},
        {"extensions": {UI_EXTENSION: {"mimeTypes": ["text/html"]}}},
        {"extensions": {UI_EXTENSION: {"mimeTypes": APP_MIME_TYPE}}},
        {"extensions": {"io.example/ui": {"mimeTypes": [APP_MIME_TYPE]}}},
    ):
        assert not offers_ui(caps), caps


async def test_a_client_without_the_extension_sees_no_change(mcp: Mcp) -> None:
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x"}}
    init = (await mcp.request("initialize", params)).json["result"]
    assert init["capabilities"] == {"tools": {"listChanged": False}}
    session = await open_session(mcp)
    listed = await mcp.request("tools/list", mcp_session_id=session)
    assert render(listed.json["result"]["tools"]) == SNAPSHOT.read_text(encoding="utf-8")
    for method, call_params in (("resources/list", {}), ("resources/read", {"uri": PAGES[0].uri})):
        reply = await mcp.request(method, call_params, mcp_session_id=session)
        assert reply.json["error"]["code"] == METHOD_NOT_FOUND
    discover = (await modern(mcp, "server/discover")).json["result"]
    assert discover["capabilities"] == {"tools": {}}
    modern_list = (await modern(mcp, "resources/list")).json
    assert modern_list["error"]["code"] == METHOD_NOT_FOUND


async def test_initialize_declares_the_extension_and_resources(mcp: Mcp) -> None:
    _, init = await apps_session(mcp)
    assert init["capabilities"] == {
        "tools": {"listChanged": False},
        "resources": {},
        "extensions": {UI_EXTENSION: {"mimeTypes": [APP_MIME_TYPE]}},
    }
    assert init["instructions"] == INSTRUCTIONS


async def test_the_session_lists_pages_on_their_tools_and_nothing_else_changes(mcp: Mcp) -> None:
    session, _ = await apps_session(mcp)
    tools = (await mcp.request("tools/list", mcp_session_id=session)).json["result"]["tools"]
    plain = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    assert [t["name"] for t in tools] == [t["name"] for t in plain]
    for tool, before in zip(tools, plain, strict=True):
        uri = TOOL_PAGES.get(tool["name"])
        if uri is None:
            assert tool == before
        else:
            assert tool.pop("_meta") == {"ui": {"resourceUri": uri}}
            assert tool == before
    # A session opened without the extension never gets it, whatever it sends later.
    other = await open_session(mcp)
    reply = await mcp.request("tools/list", mcp_session_id=other)
    assert all("_meta" not in t for t in reply.json["result"]["tools"])


async def test_resources_list_and_read_serve_every_page(mcp: Mcp) -> None:
    session, _ = await apps_session(mcp)
    listed = (await mcp.request("resources/list", mcp_session_id=session)).json["result"]
    assert "nextCursor" not in listed
    assert [r["uri"] for r in listed["resources"]] == [p.uri for p in PAGES]
    assert set(TOOL_PAGES.values()) <= {p.uri for p in PAGES}
    for resource in listed["resources"]:
        assert resource["uri"].startswith("ui://")
        assert resource["mimeType"] == APP_MIME_TYPE
        assert resource["name"] and resource["title"] and resource["description"]
        read = await mcp.request("resources/read", {"uri": resource["uri"]}, mcp_session_id=session)
        (content,) = read.json["result"]["contents"]
        assert content["uri"] == resource["uri"]
        assert content["mimeType"] == APP_MIME_TYPE
        assert content["text"].startswith("<!DOCTYPE html>")
        assert content["_meta"] == {"ui": {"prefersBorder": True}}


async def test_an_unknown_resource_is_not_found_in_each_revision(mcp: Mcp) -> None:
    session, _ = await apps_session(mcp)
    reply = await mcp.request(
        "resources/read", {"uri": "ui://ownsona/nope"}, mcp_session_id=session
    )
    assert reply.status_code == 200
    assert reply.json["error"]["code"] == -32002
    assert reply.json["error"]["data"] == {"uri": "ui://ownsona/nope"}
    missing = await mcp.request("resources/read", {}, mcp_session_id=session)
    assert missing.json["error"]["code"] == -32602
    modern_reply = await modern(
        mcp,
        "resources/read",
        {"uri": "ui://ownsona/nope"},
        meta=APPS_META,
        mcp_name="ui://ownsona/nope",
    )
    assert modern_reply.status_code == 400
    assert modern_reply.json["error"]["code"] == -32602


async def test_2026_07_28_requests_offering_the_extension_get_it(mcp: Mcp) -> None:
    discover = (await modern(mcp, "server/discover", meta=APPS_META)).json["result"]
    assert discover["capabilities"] == {
        "tools": {},
        "resources": {},
        "extensions": {UI_EXTENSION: {"mimeTypes": [APP_MIME_TYPE]}},
    }
    tools = (await modern(mcp, "tools/list", meta=APPS_META)).json["result"]["tools"]
    pages = {t["name"]: t["_meta"]["ui"]["resourceUri"] for t in tools if "_meta" in t}
    assert pages == dict(TOOL_PAGES)
    listed = (await modern(mcp, "resources/list", meta=APPS_META)).json["result"]
    assert listed["resultType"] == "complete"
    assert [r["uri"] for r in listed["resources"]] == [p.uri for p in PAGES]
    read = await modern(
        mcp, "resources/read", {"uri": PAGES[0].uri}, meta=APPS_META, mcp_name=PAGES[0].uri
    )
    assert read.status_code == 200, read.text
    assert read.json["result"]["contents"][0]["mimeType"] == APP_MIME_TYPE


async def test_what_the_extension_shaped_is_never_public_to_shared_caches(mcp: Mcp) -> None:
    # MCP 2026-07-28, Caching: a "public" result may be served by a shared cache to any
    # caller. The core listing is right for every client, so it stays public; what a
    # client offering MCP Apps gets differs from it, so it is private to that client's
    # authorization context and no shared cache hands it to a client without the extension.
    hints: dict[tuple[str, bool], tuple[Any, Any]] = {}
    for method, params in (
        ("tools/list", {}),
        ("server/discover", {}),
        ("resources/list", {}),
        ("resources/read", {"uri": PAGES[0].uri}),
    ):
        for apps in (False, True):
            named = {"mcp_name": params["uri"]} if "uri" in params else {}
            reply = await modern(mcp, method, params, meta=APPS_META if apps else META, **named)
            result = reply.json.get("result")
            if result is not None:
                hints[method, apps] = (result["cacheScope"], result["ttlMs"])
    assert hints == {
        ("tools/list", False): ("public", LIST_TTL_MS),
        ("tools/list", True): ("private", LIST_TTL_MS),
        ("server/discover", False): ("public", LIST_TTL_MS),
        ("server/discover", True): ("private", LIST_TTL_MS),
        # The resources methods exist only for a client offering the extension.
        ("resources/list", True): ("private", LIST_TTL_MS),
        ("resources/read", True): ("private", LIST_TTL_MS),
    }
    # The handshake revisions have no cache hints: the session id carries the offer.
    session, _ = await apps_session(mcp)
    legacy = (await mcp.request("tools/list", mcp_session_id=session)).json["result"]
    assert set(legacy) == {"tools"}


async def test_tool_results_are_the_same_with_and_without_the_extension(mcp: Mcp) -> None:
    session, _ = await apps_session(mcp)
    plain_session = await open_session(mcp)
    for name, args in (("recall", {"query": "where does my sister live"}), ("memory_stats", {})):
        with_apps = await mcp.call_tool(name, args, mcp_session_id=session)
        without = await mcp.call_tool(name, args, mcp_session_id=plain_session)
        assert with_apps == without
        assert set(with_apps) == {"content", "structuredContent", "isError"}


async def test_a_forged_apps_mark_on_a_session_id_is_refused(mcp: Mcp) -> None:
    plain = await open_session(mcp)
    kid, issued, nonce, mac = plain.split(".")
    forged = f"{kid}.{issued}.{nonce}.a.{mac}"
    reply = await mcp.request("tools/list", mcp_session_id=forged)
    assert reply.status_code == 404


def test_pages_load_nothing_from_any_origin() -> None:
    for page in PAGES:
        html = page_html(page.uri)
        assert html is not None
        assert "/*ownsona:" not in html  # every include was inlined
        assert "default-src 'none'" in html  # the page's own CSP forbids any fetch
        without_csp = html.replace('http-equiv="Content-Security-Policy"', "")
        for pattern in (r"https?:", r"\bsrc\s*=", r"\bhref\s*=", r"url\(", r"@import", r"//[a-z]"):
            assert not re.search(pattern, without_csp), (page.uri, pattern)
        assert "innerHTML" not in html  # memory text only ever goes into textContent
