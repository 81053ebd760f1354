"""Discovery documents: protected-resource metadata and the JWKS.

RFC 9728 §3: the metadata sits at ``/.well-known/oauth-protected-resource``
and, for a resource with a path, also at that path appended
(``/.well-known/oauth-protected-resource/mcp``); MCP clients try both. The
authorization-server metadata and the rest of ``/oauth/*`` arrive with the
OAuth server.

All of these are public and read by browser-based clients from other
origins, so they answer CORS with ``*`` (no credentials are involved).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import falcon
import falcon.asgi

from api.runtime import Runtime
from memory.settings import Settings

#: The scopes a token can carry (SUPPLEMENT §8).
SCOPES = ("memory:read", "memory:write")
#: Clients may cache discovery documents briefly; keys rotate, so not for long.
_CACHE = "public, max-age=300"


def protected_resource_metadata(settings: Settings) -> dict[str, Any]:
    """The RFC 9728 §2 document for ``/mcp``."""
    return {
        "resource": settings.resource_url,
        "authorization_servers": [settings.issuer],
        "bearer_methods_supported": ["header"],
        "scopes_supported": list(SCOPES),
        "resource_name": "OwnSona",
    }


class ProtectedResourceMetadata:
    def __init__(self, settings: Settings) -> None:
        self._document = protected_resource_metadata(settings)

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        _public_json(resp, self._document)


class Jwks:
    """``/oauth/jwks``: the keys that verify our access tokens (RFC 7517 §5)."""

    def __init__(self, runtime: Callable[[], Runtime | None]) -> None:
        self._runtime = runtime

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        runtime = self._runtime()
        if runtime is None:
            raise falcon.HTTPServiceUnavailable(
                description="The server is starting.", retry_after=1
            )
        # Follow a rotation made by another process (KeyStore.refresh_if_stale).
        await runtime.keystore.refresh_if_stale()
        _public_json(resp, runtime.keystore.jwks())


def _public_json(resp: falcon.asgi.Response, document: dict[str, Any]) -> None:
    resp.media = document
    resp.set_header("Cache-Control", _CACHE)
    resp.set_header("Access-Control-Allow-Origin", "*")
