"""``GET|POST /oauth/authorize``: the sign-in and consent pages a person sees.

:func:`auth.authorize_flow.decide` makes every decision; this resource
reads the request into its facts, answers the questions it asks (the
session cookie's user, the password check), and carries out the final
decision: a page, a redirect, a new session, a code.
"""

from __future__ import annotations

import dataclasses
import logging
from urllib.parse import parse_qsl, urlsplit

import falcon
import falcon.asgi

from api.errors import NO_STORE
from api.oauth_http import FORM, media_type, read_body
from api.oauth_pages import STYLE_HASH, consent_page, error_page, login_page
from api.oauth_services import OAuthServices
from auth import csrf
from auth.authorize import (
    echoed_fields,
    error_answer,
    named_client_id,
    redirect_params,
)
from auth.authorize_flow import (
    AllowConsent,
    AuthorizeFacts,
    CheckPassword,
    Decision,
    ErrorPage,
    ErrorRedirect,
    LoginPage,
    LookUpSession,
    Proceed,
    decide,
)
from auth.client_documents import published_host
from auth.consents import IssuedCode
from auth.oauth_errors import OAuthError
from auth.opaque import presentable
from auth.redirects import origin_of, with_params
from auth.sessions import cookie_names

logger = logging.getLogger("ownsona.api.oauth")


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
            body = await read_body(req)
        except OAuthError as ex:
            self._page(resp, 400, error_page("Bad request", ex.description))
            return
        if media_type(req) != FORM:
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
        services = self._services
        session_id = _cookie(req, self._cookies.session)
        try:
            client = await services.clients.find(named_client_id(params))
        except OAuthError as ex:
            # A metadata document that cannot be fetched or used: its redirect URIs are
            # unknown, so the user is told and nothing goes to the client (RFC 6749 §4.1.2.1).
            logger.warning("authorization request refused (%s): %r", ex.error, ex.description)
            self._page(resp, 400, error_page("This connection cannot continue", ex.description))
            return
        facts = AuthorizeFacts(
            params=params,
            client=client,
            resource_url=self._services.settings.resource_url,
            form=form,
            origin=req.get_header("Origin"),
            own_origin=self._own_origin,
            csrf_cookie=_cookie(req, self._cookies.csrf),
        )
        while True:
            step = decide(facts)
            if isinstance(step, LookUpSession):
                user_id = await services.sessions.user(session_id)
                facts = dataclasses.replace(facts, session_checked=True, session_user=user_id)
            elif isinstance(step, CheckPassword):
                address = req.remote_addr or "unknown"
                outcome = await services.guard.sign_in(step.username, step.password, address)
                facts = dataclasses.replace(facts, sign_in=outcome)
            else:
                break
        await self._carry_out(resp, services, step, facts, session_id)

    async def _carry_out(
        self,
        resp: falcon.asgi.Response,
        services: OAuthServices,
        decision: Decision,
        facts: AuthorizeFacts,
        session_id: str | None,
    ) -> None:
        if isinstance(decision, ErrorPage):
            if decision.log is not None:
                logger.warning("%s", decision.log)
            self._page(resp, decision.status, error_page(decision.title, decision.message))
        elif isinstance(decision, ErrorRedirect):
            if decision.log is not None:
                logger.info("%s", decision.log)
            params = error_answer(decision.error)
            self._redirect(resp, decision.redirect_uri, params, decision.state, post=decision.post)
        elif isinstance(decision, LoginPage):
            if decision.log is not None:
                logger.warning("%s", decision.log)
            if decision.retry_after_s is not None:
                resp.set_header("Retry-After", str(decision.retry_after_s))
            self._login(resp, decision, facts)
        elif isinstance(decision, Proceed):
            if decision.new_session:
                replacing = session_id if presentable(session_id) else None
                new_session = await services.sessions.start(decision.user_id, replacing)
                self._set_cookie(resp, self._cookies.session, new_session, services.sessions.ttl_s)
            await self._consent_or_code(resp, services, decision, facts)
        elif isinstance(decision, AllowConsent):
            request = decision.request
            code = await services.consents.allow(request, decision.user_id)
            logger.info(
                "user %s allowed client %s (%s)",
                decision.user_id,
                request.client.client_id,
                request.scope,
            )
            self._redirect(resp, request.redirect_uri, {"code": code}, request.state, post=True)

    async def _consent_or_code(
        self,
        resp: falcon.asgi.Response,
        services: OAuthServices,
        decision: Proceed,
        facts: AuthorizeFacts,
    ) -> None:
        """A signed-in user: straight to the client if already allowed, else the consent page."""
        request = decision.request
        outcome = await services.consents.code_or_question(request, decision.user_id)
        if isinstance(outcome, IssuedCode):
            answer = {"code": outcome.code}
            self._redirect(resp, request.redirect_uri, answer, request.state, post=decision.post)
            return
        html = consent_page(
            action=self._action,
            fields=echoed_fields(facts.params),
            csrf=self._csrf_token(resp, facts),
            client_name=request.client_name,
            username=outcome.username,
            scopes=request.scope.split(),
            redirect_host=urlsplit(request.redirect_uri).netloc,
            client_host=published_host(request.client),
        )
        self._page(resp, 200, html, redirect_uri=request.redirect_uri)

    def _login(self, resp: falcon.asgi.Response, page: LoginPage, facts: AuthorizeFacts) -> None:
        request = page.request
        html = login_page(
            action=self._action,
            fields=echoed_fields(facts.params),
            csrf=self._csrf_token(resp, facts),
            client_name=request.client_name,
            username=page.username,
            error=page.error,
            client_host=published_host(request.client),
        )
        self._page(resp, page.status, html, redirect_uri=request.redirect_uri)

    def _redirect(
        self,
        resp: falcon.asgi.Response,
        redirect_uri: str,
        answer: dict[str, str],
        state: str | None,
        *,
        post: bool,
    ) -> None:
        params = redirect_params(answer, state, self._services.settings.issuer)
        # 303 after a POST, so the browser follows with a GET (OAuth 2.1 §7.5.4 / RFC 9700 §4.11).
        resp.status = falcon.HTTP_303 if post else falcon.HTTP_302
        resp.set_header("Location", with_params(redirect_uri, params))
        for name, value in NO_STORE.items():
            resp.set_header(name, value)
        resp.set_header("Referrer-Policy", "no-referrer")
        resp.data = b""

    def _csrf_token(self, resp: falcon.asgi.Response, facts: AuthorizeFacts) -> str:
        """The browser's CSRF token for the next form, or a new one set as its cookie."""
        if presentable(facts.csrf_cookie):
            return facts.csrf_cookie
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


def _cookie(req: falcon.asgi.Request, name: str) -> str | None:
    """The first value of cookie ``name``, or None."""
    values = req.get_cookie_values(name)
    return values[0] if values else None
