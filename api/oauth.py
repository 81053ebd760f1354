"""``/oauth/*``: registration, authorization (sign-in and consent pages), token, revocation.

The protocol decisions live in ``auth``; this module reads requests,
renders pages and writes responses. Endpoints (SUPPLEMENT §8):

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
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import falcon
import falcon.asgi

from api.errors import NO_STORE, HttpReply, oauth_reply
from api.oauth_pages import STYLE_HASH, consent_page, error_page, login_page
from api.runtime import Runtime
from auth import csrf
from auth.authorize import AuthorizationRequest, echoed_fields, single, trusted_redirect, validate
from auth.clients import authenticate_client, client_credentials, register_client
from auth.errors import AccountError
from auth.grants import Grants, parse_token_request
from auth.oauth_errors import AuthorizePageError, OAuthError
from auth.opaque import presentable
from auth.redirects import origin_of, with_params
from auth.sessions import SESSION_TTL_S, Sessions, cookie_names
from auth.throttle import LoginGuard, ThrottlePolicy
from config.settings import Settings
from storage import oauth, users
from storage.tokens import CLI_CLIENT_ID

logger = logging.getLogger("ownsona.api.oauth")

#: Largest form or JSON body the OAuth endpoints read, in bytes.
MAX_OAUTH_BODY = 64 * 1024
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
_FORM = "application/x-www-form-urlencoded"


@dataclass(frozen=True)
class OAuthOptions:
    """Knobs for tests and operators; the defaults are the documented policy."""

    throttle: ThrottlePolicy = field(default_factory=ThrottlePolicy)
    #: The throttle's clock (UTC); None means the wall clock.
    clock: Callable[[], datetime] | None = None
    session_ttl_s: int = SESSION_TTL_S


@dataclass
class _Services:
    runtime: Runtime
    grants: Grants
    guard: LoginGuard
    sessions: Sessions


class OAuthServices:
    """Builds the OAuth collaborators from the runtime once it exists (after startup)."""

    def __init__(
        self, runtime: Callable[[], Runtime | None], settings: Settings, options: OAuthOptions
    ) -> None:
        self._runtime = runtime
        self.settings = settings
        self._options = options
        self._built: _Services | None = None

    def get(self) -> _Services:
        runtime = self._runtime()
        if runtime is None:
            raise falcon.HTTPServiceUnavailable(
                description="The server is starting.", retry_after=1
            )
        if self._built is None or self._built.runtime is not runtime:
            pool = runtime.deps.pool
            self._built = _Services(
                runtime,
                Grants(pool, runtime.keystore, self.settings),
                LoginGuard(pool, self._options.throttle, self._options.clock),
                Sessions(pool, self._options.session_ttl_s),
            )
        return self._built


# -- registration, token, revocation --------------------------------------------


class Registration:
    """``POST /oauth/register`` (RFC 7591 §3)."""

    def __init__(self, services: OAuthServices) -> None:
        self._services = services

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        if not self._services.settings.oauth_allow_dynamic_registration:
            _send(
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
        services = self._services.get()
        if _media_type(req) != "application/json":
            raise OAuthError("invalid_client_metadata", "Send the metadata as application/json.")
        body = await _read_body(req)
        try:
            raw = json.loads(body)
        except ValueError:
            raise OAuthError("invalid_client_metadata", "The body is not valid JSON.") from None
        async with services.runtime.deps.pool.connection() as conn:
            registration = await register_client(conn, raw)
        logger.info(
            "registered OAuth client %s (%r, %s)",
            registration.client.client_id,
            registration.client.client_name,
            registration.client.token_endpoint_auth_method,
        )
        _send(resp, HttpReply(201, registration.response(), dict(NO_STORE)))


class Token:
    """``POST /oauth/token`` (OAuth 2.1 §3.2)."""

    def __init__(self, services: OAuthServices) -> None:
        self._services = services

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        services = self._services.get()
        form = await _read_form(req)
        creds = client_credentials(form, req.get_header("Authorization"))
        request = parse_token_request(form)
        async with services.runtime.deps.pool.connection() as conn:
            client = await authenticate_client(conn, creds)
        tokens = await services.grants.exchange(request, client)
        _send(resp, HttpReply(200, tokens.to_json(), dict(NO_STORE)))


class Revocation:
    """``POST /oauth/revoke`` (RFC 7009 §2)."""

    def __init__(self, services: OAuthServices) -> None:
        self._services = services

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        services = self._services.get()
        form = await _read_form(req)
        creds = client_credentials(form, req.get_header("Authorization"))
        token = form.get("token")
        if creds.client_id in (None, CLI_CLIENT_ID) and creds.client_secret is None and token:
            # An `ownsona token` token belongs to no registered client, so it
            # cannot be authenticated as RFC 7009 §2.1 asks; the token proves
            # itself instead (a valid signature), and revoking only takes
            # away what its holder could do anyway.
            if await services.grants.revoke_cli_token(token):
                _send(resp, HttpReply(200, None, dict(NO_STORE)))
                return
        async with services.runtime.deps.pool.connection() as conn:
            client = await authenticate_client(conn, creds)
        if not token:
            raise OAuthError("invalid_request", "token is required.")
        await services.grants.revoke(token, form.get("token_type_hint"), client)
        _send(resp, HttpReply(200, None, dict(NO_STORE)))


# -- authorization ---------------------------------------------------------------


class Authorize:
    """``/oauth/authorize``: the pages a person sees."""

    def __init__(self, services: OAuthServices) -> None:
        self._services = services
        settings = services.settings
        self._cookies = cookie_names(settings.secure_cookies)
        self._action = urlsplit(settings.public_url).path + "/oauth/authorize"
        self._own_origin = origin_of(settings.public_url)

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        params = parse_qsl(req.query_string, keep_blank_values=True)
        await self._handle(req, resp, params, None)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        try:
            body = await _read_body(req)
        except OAuthError as ex:
            self._page(resp, 400, error_page("Bad request", ex.description))
            return
        if _media_type(req) != _FORM:
            self._page(resp, 400, error_page("Bad request", "Submit the form from its page."))
            return
        pairs = parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
        form = {k: v for k, v in reversed(pairs)}  # the first value of each name
        await self._handle(req, resp, pairs, form)

    async def _handle(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        params: list[tuple[str, str]],
        form: dict[str, str] | None,
    ) -> None:
        services = self._services.get()
        pool = services.runtime.deps.pool
        client_ids = [v for k, v in params if k == "client_id"]
        client = None
        if len(client_ids) == 1 and presentable(client_ids[0]):
            async with pool.connection() as conn:
                client = await oauth.get_client(conn, client_ids[0])
        try:
            redirect_uri = trusted_redirect(params, client)
        except AuthorizePageError as ex:
            logger.warning("authorization request refused (%s): %s", ex.error, ex.description)
            self._page(resp, 400, error_page("This connection cannot continue", ex.description))
            return
        assert client is not None
        try:
            request = validate(params, client, redirect_uri, self._services.settings.resource_url)
        except OAuthError as ex:
            state = _first(params, "state")
            self._redirect(resp, redirect_uri, _error_params(ex, state), post=form is not None)
            return

        csrf_token = req.get_cookie_values(self._cookies.csrf)
        cookie_csrf = csrf_token[0] if csrf_token else None
        session_values = req.get_cookie_values(self._cookies.session)
        session_id = session_values[0] if session_values else None
        fields = echoed_fields(params)

        if form is None:
            user_id = None
            if "login" not in request.prompt:
                user_id = await services.sessions.user(session_id)
            if user_id is None:
                self._login(resp, request, fields, cookie_csrf, 200)
            else:
                await self._consent_or_code(resp, services, request, fields, cookie_csrf, user_id)
            return

        # A POST: one of our forms. Refuse cross-site submissions first.
        origin = req.get_header("Origin")
        if origin is not None and origin != "null" and origin.rstrip("/") != self._own_origin:
            self._page(resp, 403, error_page("Request refused", "The form came from another site."))
            return
        if not csrf.token_matches(cookie_csrf, form.get(csrf.FIELD)):
            logger.warning(
                "authorization form without a valid CSRF token (client %s)", client.client_id
            )
            self._login(
                resp,
                request,
                fields,
                cookie_csrf,
                403,
                error="This form expired or did not come from this page. Please sign in again.",
            )
            return

        action = form.get("action")
        if action == "login":
            username = form.get("username", "")
            try:
                outcome = await services.guard.sign_in(
                    username, form.get("password", ""), req.remote_addr or "unknown"
                )
            except AccountError as ex:
                # Raised only for the right password of a disabled account.
                if ex.problem != "account_disabled":
                    raise
                self._login(
                    resp, request, fields, cookie_csrf, 403, username=username, error=ex.message
                )
                return
            if outcome.retry_after_s is not None:
                resp.set_header("Retry-After", str(outcome.retry_after_s))
                self._login(
                    resp,
                    request,
                    fields,
                    cookie_csrf,
                    429,
                    username=username,
                    error=f"Too many failed sign-ins. Wait {outcome.retry_after_s} seconds and "
                    "try again.",
                )
                return
            if outcome.user_id is None:
                self._login(
                    resp,
                    request,
                    fields,
                    cookie_csrf,
                    400,
                    username=username,
                    error="Incorrect username or password.",
                )
                return
            async with pool.connection() as conn:
                new_session = await services.sessions.start(conn, outcome.user_id)
            if presentable(session_id):
                assert session_id is not None
                await services.sessions.end(session_id)
            self._set_cookie(resp, self._cookies.session, new_session, services.sessions.ttl_s)
            await self._consent_or_code(
                resp, services, request, fields, cookie_csrf, outcome.user_id, post=True
            )
            return

        if action == "consent":
            user_id = await services.sessions.user(session_id)
            if user_id is None:
                self._login(
                    resp,
                    request,
                    fields,
                    cookie_csrf,
                    200,
                    error="Your sign-in expired. Please sign in again.",
                )
                return
            decision = form.get("decision")
            if decision == "allow":
                async with pool.connection() as conn, conn.transaction():
                    await oauth.upsert_consent(conn, user_id, client.client_id, request.scope)
                    code = await services.grants.issue_code(
                        conn,
                        client_id=client.client_id,
                        user_id=user_id,
                        redirect_uri=request.redirect_uri,
                        code_challenge=request.code_challenge,
                        scope=request.scope,
                        resource=request.resource,
                    )
                logger.info(
                    "user %s allowed client %s (%s)", user_id, client.client_id, request.scope
                )
                self._redirect(resp, redirect_uri, self._code_params(code, request), post=True)
                return
            if decision == "deny":
                logger.info("user %s denied client %s", user_id, client.client_id)
                denied = OAuthError("access_denied", "The user denied the request.")
                self._redirect(resp, redirect_uri, _error_params(denied, request.state), post=True)
                return
        self._page(resp, 400, error_page("Bad request", "Submit the form from its page."))

    async def _consent_or_code(
        self,
        resp: falcon.asgi.Response,
        services: _Services,
        request: AuthorizationRequest,
        fields: list[tuple[str, str]],
        cookie_csrf: str | None,
        user_id: int,
        *,
        post: bool = False,
    ) -> None:
        """A signed-in user: straight to the client if already allowed, else the consent page."""
        client = request.client
        user = None
        async with services.runtime.deps.pool.connection() as conn, conn.transaction():
            allowed = await oauth.get_consent(conn, user_id, client.client_id)
            covered = allowed is not None and set(request.scope.split()) <= set(allowed.split())
            if covered and "consent" not in request.prompt:
                code = await services.grants.issue_code(
                    conn,
                    client_id=client.client_id,
                    user_id=user_id,
                    redirect_uri=request.redirect_uri,
                    code_challenge=request.code_challenge,
                    scope=request.scope,
                    resource=request.resource,
                )
            else:
                code = None
                user = await users.get_user(conn, user_id)
        if code is not None:
            self._redirect(resp, request.redirect_uri, self._code_params(code, request), post=post)
            return
        token = cookie_csrf if presentable(cookie_csrf) else self._new_csrf(resp)
        assert token is not None
        html = consent_page(
            action=self._action,
            fields=fields,
            csrf=token,
            client_name=request.client_name,
            username=user.username if user is not None else str(user_id),
            scopes=request.scope.split(),
            redirect_host=urlsplit(request.redirect_uri).netloc,
        )
        self._page(resp, 200, html, redirect_uri=request.redirect_uri)

    def _login(
        self,
        resp: falcon.asgi.Response,
        request: AuthorizationRequest,
        fields: list[tuple[str, str]],
        cookie_csrf: str | None,
        status: int,
        *,
        username: str = "",
        error: str | None = None,
    ) -> None:
        token = cookie_csrf if presentable(cookie_csrf) else self._new_csrf(resp)
        assert token is not None
        html = login_page(
            action=self._action,
            fields=fields,
            csrf=token,
            client_name=request.client_name,
            username=username,
            error=error,
        )
        self._page(resp, status, html, redirect_uri=request.redirect_uri)

    def _code_params(self, code: str, request: AuthorizationRequest) -> dict[str, str]:
        params = {"code": code}
        if request.state is not None:
            params["state"] = request.state
        params["iss"] = self._services.settings.issuer  # RFC 9207 §2
        return params

    def _redirect(
        self, resp: falcon.asgi.Response, redirect_uri: str, params: dict[str, str], *, post: bool
    ) -> None:
        if "iss" not in params:
            params["iss"] = self._services.settings.issuer
        # 303 after a POST, so the browser follows with a GET (OAuth 2.1 §7.5.4 / RFC 9700 §4.11).
        resp.status = falcon.HTTP_303 if post else falcon.HTTP_302
        resp.set_header("Location", with_params(redirect_uri, params))
        for name, value in NO_STORE.items():
            resp.set_header(name, value)
        resp.set_header("Referrer-Policy", "no-referrer")
        resp.data = b""

    def _new_csrf(self, resp: falcon.asgi.Response) -> str:
        token = csrf.new_token()
        self._set_cookie(resp, self._cookies.csrf, token, None)
        return token

    def _set_cookie(
        self, resp: falcon.asgi.Response, name: str, value: str, max_age: int | None
    ) -> None:
        resp.set_cookie(
            name,
            value,
            max_age=max_age,
            path="/",
            secure=self._services.settings.secure_cookies,
            http_only=True,
            same_site="Lax",
        )

    def _page(
        self, resp: falcon.asgi.Response, status: int, html: str, *, redirect_uri: str | None = None
    ) -> None:
        # form-action also governs where a form's redirect may go (CSP3): allow the client's.
        targets = "'self'" + (f" {origin_of(redirect_uri)}" if redirect_uri else "")
        resp.status = status
        resp.content_type = "text/html; charset=utf-8"
        resp.data = html.encode("utf-8")
        resp.set_header(
            "Content-Security-Policy",
            f"default-src 'none'; style-src {STYLE_HASH}; form-action {targets}; "
            "frame-ancestors 'none'; base-uri 'none'",
        )
        resp.set_header("X-Frame-Options", "DENY")
        resp.set_header("X-Content-Type-Options", "nosniff")
        resp.set_header("Referrer-Policy", "no-referrer")
        for name, value in NO_STORE.items():
            resp.set_header(name, value)


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
    _send(resp, oauth_reply(ex))


# -- helpers ------------------------------------------------------------------------


def _media_type(req: falcon.asgi.Request) -> str:
    return (req.content_type or "").split(";")[0].strip().lower()


async def _read_body(req: falcon.asgi.Request) -> bytes:
    declared = req.content_length
    if declared is not None and declared > MAX_OAUTH_BODY:
        raise OAuthError("invalid_request", f"The body exceeds {MAX_OAUTH_BODY} bytes.")
    chunks: list[bytes] = []
    total = 0
    async for chunk in req.stream:
        total += len(chunk)
        if total > MAX_OAUTH_BODY:
            raise OAuthError("invalid_request", f"The body exceeds {MAX_OAUTH_BODY} bytes.")
        chunks.append(chunk)
    return b"".join(chunks)


async def _read_form(req: falcon.asgi.Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body; repeated parameters are refused."""
    if _media_type(req) != _FORM:
        raise OAuthError("invalid_request", f"Send the parameters as {_FORM}.")
    body = await _read_body(req)
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        raise OAuthError("invalid_request", "The form body is malformed.") from None
    form: dict[str, str] = {}
    for key, value in pairs:
        if key in form:
            # RFC 6749 §3.2: request parameters MUST NOT be included more than once.
            raise OAuthError("invalid_request", f"{key} must not be repeated.")
        form[key] = value
    return form


def _first(params: list[tuple[str, str]], name: str) -> str | None:
    try:
        return single(params, name)
    except OAuthError:
        return None


def _error_params(ex: OAuthError, state: str | None) -> dict[str, str]:
    params = {"error": ex.error, "error_description": ex.description}
    if state is not None:
        params["state"] = state
    return params


def _send(resp: falcon.asgi.Response, reply: HttpReply) -> None:
    resp.status = reply.status
    for name, value in reply.headers.items():
        resp.set_header(name, value)
    if reply.body is None:
        resp.data = b""
        resp.content_type = None
    else:
        resp.data = json.dumps(reply.body).encode()
        resp.content_type = "application/json"
