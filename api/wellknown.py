"""Discovery documents: protected-resource metadata, authorization-server metadata, JWKS.

RFC 9728 §3: the metadata sits at ``/.well-known/oauth-protected-resource``
and, for a resource with a path, also at that path appended
(``/.well-known/oauth-protected-resource/mcp``); MCP clients try both.
RFC 8414 §3: the authorization-server metadata sits at
``/.well-known/oauth-authorization-server``; its ``issuer`` is
``OWNSONA_PUBLIC_URL`` byte for byte (no trailing slash), which clients
compare as a string with the ``authorization_servers`` entry above and
with the ``iss`` of the authorization response (RFC 9207).

All of these are public and read by browser-based clients from other
origins, so they answer CORS with ``*`` (no credentials are involved).
"""

from __future__ import annotations

from typing import Any

import falcon
import falcon.asgi

from auth.client_assertions import SIGNING_ALGS
from auth.client_metadata import AUTH_METHODS, GRANT_TYPES
from auth.keys import KeyStore
from auth.loopback import resource_for_host
from auth.pkce import S256
from auth.scopes import SUPPORTED_SCOPES
from config.settings import Settings

#: The scopes a token can carry (SUPPLEMENT §8).
SCOPES = SUPPORTED_SCOPES
#: Clients may cache discovery documents briefly; keys rotate, so not for long.
_CACHE = "public, max-age=300"


def protected_resource_metadata(settings: Settings, host: str | None = None) -> dict[str, Any]:
    """The RFC 9728 §2 document for ``/mcp``, as seen from ``Host: host``.

    ``localhost`` and ``127.0.0.1`` are one loopback server (``auth.loopback``):
    the resource is named as the client named it; the issuer stays the same.
    """
    return {
        "resource": resource_for_host(settings.resource_url, host),
        "authorization_servers": [settings.issuer],
        "bearer_methods_supported": ["header"],
        "scopes_supported": list(SCOPES),
        "resource_name": "OwnSona",
    }


def authorization_server_metadata(settings: Settings) -> dict[str, Any]:
    """The RFC 8414 §2 document.

    ``client_id_metadata_document_supported``: an https URL is accepted as
    a client_id (``auth.client_documents``; MCP 2026-07-28 client
    registration). Claude uses it only when ``none`` is also among the
    token endpoint's methods; ``private_key_jwt`` (ChatGPT's preference)
    comes with its signing algorithms. Without dynamic registration there
    is no ``registration_endpoint``.
    """
    methods = [*AUTH_METHODS, "private_key_jwt"]
    base = settings.issuer
    document: dict[str, Any] = {
        "issuer": base,
        "authorization_endpoint": f"{base}/oauth/authorize",
        "token_endpoint": f"{base}/oauth/token",
        "jwks_uri": f"{base}/oauth/jwks",
        "revocation_endpoint": f"{base}/oauth/revoke",
        "scopes_supported": list(SCOPES),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": list(GRANT_TYPES),
        "token_endpoint_auth_methods_supported": methods,
        "token_endpoint_auth_signing_alg_values_supported": list(SIGNING_ALGS),
        "revocation_endpoint_auth_methods_supported": methods,
        "revocation_endpoint_auth_signing_alg_values_supported": list(SIGNING_ALGS),
        "code_challenge_methods_supported": [S256],
        "authorization_response_iss_parameter_supported": True,
        "client_id_metadata_document_supported": True,
    }
    if settings.oauth_allow_dynamic_registration:
        document["registration_endpoint"] = f"{base}/oauth/register"
    return document


class AuthorizationServerMetadata:
    def __init__(self, settings: Settings) -> None:
        self._document = authorization_server_metadata(settings)

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        _public_json(resp, self._document)


class ProtectedResourceMetadata:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        _public_json(resp, protected_resource_metadata(self._settings, req.get_header("Host")))


class Jwks:
    """``/oauth/jwks``: the keys that verify our access tokens (RFC 7517 §5)."""

    def __init__(self, keystore: KeyStore) -> None:
        self._keystore = keystore

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        # Follow a rotation made by another process (KeyStore.refresh_if_stale).
        await self._keystore.refresh_if_stale()
        _public_json(resp, self._keystore.jwks())


def _public_json(resp: falcon.asgi.Response, document: dict[str, Any]) -> None:
    resp.media = document
    resp.set_header("Cache-Control", _CACHE)
    resp.set_header("Access-Control-Allow-Origin", "*")
