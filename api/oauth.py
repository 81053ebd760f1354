"""``/oauth/*``: registration, authorization (sign-in and consent pages), token, revocation.

The protocol decisions live in ``auth``; this module and its siblings
(``api.oauth_authorize`` for the pages, ``api.oauth_http`` for bodies,
``api.http_reply`` for replies, ``api.oauth_services`` for the
collaborators) read requests,
render pages and write responses. Endpoints (SUPPLEMENT §8):

- ``POST /oauth/register`` (RFC 7591): JSON in, 201 with the client
  information; 403 when ``OAUTH_ALLOW_DYNAMIC_REGISTRATION`` is off.
- ``GET|POST /oauth/authorize`` (OAuth 2.1 §4.1): an untrusted client or
  redirect URI gets an HTML error page; any other problem goes back to the
  client as ``error`` + ``state`` + ``iss`` (RFC 9207). Otherwise: the
  sign-in form (skipped while a browser session is valid), then the
  consent form (skipped for a client the user already allowed this scope,
  unless ``prompt=consent``), then a redirect with ``code``, ``state`` and
  ``iss``. Forms are stateless: they carry the authorization parameters in
  hidden fields and every POST re-validates them, plus a CSRF token
  (``auth.csrf``) and an ``Origin`` check.
- ``POST /oauth/token``: ``authorization_code`` and ``refresh_token``
  grants (``auth.grants``); JSON with ``Cache-Control: no-store``.
- ``POST /oauth/revoke`` (RFC 7009): always 200 for an authenticated client;
  also 200, without client authentication, for a valid ``ownsona token``
  access token presented as the token (it has no client; it proves itself).

Registration, token and revocation answer CORS with ``*`` (browser-based
clients such as the MCP Inspector call them; no cookies are involved).
The pages get a strict Content-Security-Policy, ``frame-ancestors 'none'``
against clickjacking, and ``no-store``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import falcon
import falcon.asgi

from api.errors import NO_STORE, HttpReply, oauth_reply
from api.http_reply import send
from api.oauth_authorize import Authorize
from api.oauth_http import media_type, read_body, read_form
from api.oauth_services import OAuthOptions, OAuthServices
from auth import token_endpoint
from auth.oauth_errors import OAuthError

__all__ = [
    "CORS_PATHS",
    "Authorize",
    "OAuthCors",
    "OAuthOptions",
    "OAuthServices",
    "Registration",
    "Revocation",
    "Token",
    "handle_oauth_error",
]

logger = logging.getLogger("ownsona.api.oauth")

#: Paths that answer CORS with ``*`` (public metadata and client-to-server endpoints).
CORS_PATHS = frozenset(
    {
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/oauth/jwks",
        "/oauth/register",
        "/oauth/token",
        "/oauth/revoke",
    }
)
_CORS_ALLOW_HEADERS = "authorization, content-type, mcp-protocol-version"


# -- registration, token, revocation --------------------------------------------


class Registration:
    """``POST /oauth/register`` (RFC 7591 §3)."""

    def __init__(self, services: OAuthServices) -> None:
        self._services = services

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        if not self._services.settings.oauth_allow_dynamic_registration:
            send(
                resp,
                HttpReply(
                    403,
                    {
                        "error": "access_denied",
                        "error_description": "Dynamic client registration is disabled on this server; "
                        "ask its operator for a client_id.",
                    },
                    dict(NO_STORE),
                ),
            )
            return
        services = self._services
        if media_type(req) != "application/json":
            raise OAuthError("invalid_client_metadata", "Send the metadata as application/json.")
        body = await read_body(req)
        try:
            raw = json.loads(body)
        except ValueError:
            raise OAuthError("invalid_client_metadata", "The body is not valid JSON.") from None
        registration = await services.clients.register(raw)
        logger.info(
            "registered OAuth client %s (%r, %s)",
            registration.client.client_id,
            registration.client.client_name,
            registration.client.token_endpoint_auth_method,
        )
        send(resp, HttpReply(201, registration.response(), dict(NO_STORE)))


class Token:
    """``POST /oauth/token`` (OAuth 2.1 §3.2)."""

    def __init__(self, services: OAuthServices) -> None:
        self._services = services

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        services = self._services
        form = await read_form(req)
        tokens = await token_endpoint.exchange(
            services.clients, services.grants, form, req.get_header("Authorization")
        )
        send(resp, HttpReply(200, tokens.to_json(), dict(NO_STORE)))


class Revocation:
    """``POST /oauth/revoke`` (RFC 7009 §2)."""

    def __init__(self, services: OAuthServices) -> None:
        self._services = services

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        services = self._services
        form = await read_form(req)
        await token_endpoint.revoke(
            services.clients, services.grants, form, req.get_header("Authorization")
        )
        send(resp, HttpReply(200, None, dict(NO_STORE)))


# -- CORS and errors ---------------------------------------------------------------


class OAuthCors:
    """Falcon middleware: ``*`` CORS on :data:`CORS_PATHS`, preflights answered here."""

    async def process_request(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        if req.method != "OPTIONS" or req.path not in CORS_PATHS:
            return
        resp.status = falcon.HTTP_204
        resp.set_header("Access-Control-Allow-Origin", "*")
        resp.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
        resp.set_header("Access-Control-Allow-Headers", _CORS_ALLOW_HEADERS)
        resp.set_header("Access-Control-Max-Age", "86400")
        resp.complete = True

    async def process_response(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, resource: Any, ok: bool
    ) -> None:
        if req.path in CORS_PATHS:
            resp.set_header("Access-Control-Allow-Origin", "*")
            resp.set_header("Access-Control-Expose-Headers", "www-authenticate")


async def handle_oauth_error(
    req: falcon.asgi.Request, resp: falcon.asgi.Response, ex: OAuthError, params: dict[str, Any]
) -> None:
    """Falcon error handler: an :class:`OAuthError` from an endpoint becomes RFC 6749 JSON."""
    send(resp, oauth_reply(ex))
