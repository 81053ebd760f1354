"""What the listing methods answer a client, and who may cache it.

``tools/list``, ``resources/list`` and ``resources/read`` depend on one thing
about the caller: whether it offered MCP Apps (``api.mcp.apps``). A client
without the extension gets the core listing: the tools, no ``_meta.ui``, and no
resources methods. One offering it gets the tools with their pages and the
pages themselves.

Caching (MCP 2026-07-28, "Caching"; results there carry ``ttlMs`` and
``cacheScope``). ``"public"`` lets "any client, shared gateway, or caching
proxy" serve a result "to any user", and the spec warns that such results "may
be shared between callers". So ``"public"`` goes only on a result that is right
for every caller: the core listing, which any client may use (a host with MCP
Apps that gets it falls back to core behaviour, as Versioning, "Extension
Negotiation", allows). A result shaped by the caller's offer of the extension
is ``"private"``: reused only within the same authorization context, that is
one access token, issued to one OAuth client (one host, whose capabilities are
its own), never handed by a shared cache to a client that did not offer the
extension. Nothing in either result is user-specific; "private" only keeps the
capability-shaped variant with the client it was shaped for. The Cache Key
rule (a cached result is reused only for a request whose parameters match,
``_meta``'s client capabilities included) says the same; the scope makes it hold
for a cache that keys on the method alone.

Freshness: the listings change only with a deploy of new code (no
``listChanged`` notifications are sent), so they are fresh for an hour. A
client that keeps an older list after a deploy learns of the change at the
latest an hour later, or sooner from a failed call (Caching, "Freshness": a
client MAY re-fetch on an unexpected error).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from api.mcp.apps import resources as apps_resources
from api.mcp.apps.pages import TOOL_PAGES
from api.mcp.tool_spec import ToolSpec
from api.mcp.versions import ProtocolRules

LIST_TTL_MS = 3_600_000
#: The scope of a result any caller may be given (the core listing).
PUBLIC: Literal["public"] = "public"
#: The scope of a result shaped by the caller's offer of MCP Apps.
PRIVATE: Literal["private"] = "private"


def cache_hints(*, apps: bool) -> dict[str, Any]:
    """``ttlMs`` and ``cacheScope`` of a cacheable result for a client with or without MCP Apps."""
    return {"ttlMs": LIST_TTL_MS, "cacheScope": PRIVATE if apps else PUBLIC}


class Listings:
    """The tool listings (built once, one per kind of client) and the resources methods."""

    #: The methods :meth:`answer` serves (for a client with MCP Apps; tools/list for all).
    METHODS = frozenset({"tools/list", "resources/list", "resources/read"})

    def __init__(self, tools: Mapping[str, ToolSpec]) -> None:
        self._core = [spec.listing() for spec in tools.values()]
        # For a client with MCP Apps: the same tools, those with a page naming it.
        self._apps = [
            apps_resources.with_page(spec.listing(), TOOL_PAGES.get(spec.name))
            for spec in tools.values()
        ]

    def serves(self, method: str | None, *, apps: bool) -> bool:
        """Whether ``method`` is one of ours for this client (resources only with MCP Apps)."""
        return method == "tools/list" or (apps and method in self.METHODS)

    def answer(
        self, method: str | None, params: dict[str, Any], rules: ProtocolRules, *, apps: bool
    ) -> dict[str, Any]:
        """The result of ``method`` (one :meth:`serves`) for this client, with the revision's
        cache hints; ``resources/read`` raises the revision's not-found error."""
        if method == "tools/list":
            # One page holds every tool: a cursor is accepted and ignored, no nextCursor.
            value = {"tools": self._apps if apps else self._core}
        elif method == "resources/list":
            value = apps_resources.list_result()
        else:
            value = apps_resources.read_result(params, modern=rules.per_request_meta)
        if rules.cache_hints:
            value.update(cache_hints(apps=apps))
        return value
