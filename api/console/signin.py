"""``/console/sign-in`` and ``/console/sign-out``: the console's own sign-in form.

The same account, password check, throttle and session cookie as the OAuth
login page: signing in here also signs in there, and the reverse.
"""

from __future__ import annotations

import logging

import falcon
import falcon.asgi

from api.console.guard import ConsoleRequest, safe_next, set_session_cookie
from api.console.services import ConsoleServices

logger = logging.getLogger("ownsona.api.console")


class SignIn:
    def __init__(self, services: ConsoleServices) -> None:
        self._s = services

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        console: ConsoleRequest = req.context.console
        target = safe_next(req.get_param("next"))
        if console.account is not None:
            self._s.renderer.redirect(resp, target)
            return
        self._form(req, resp, target)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        console: ConsoleRequest = req.context.console
        target = safe_next(console.value("next"))
        username = console.value("username").strip()
        password = console.value("password")
        if not username or not password:
            self._form(req, resp, target, username, "Enter your username and password.", 400)
            return
        outcome = await self._s.login_guard.sign_in(username, password, req.remote_addr or "")
        if outcome.retry_after_s is not None:
            resp.set_header("Retry-After", str(outcome.retry_after_s))
            message = f"Too many attempts. Try again in {outcome.retry_after_s} seconds."
            self._form(req, resp, target, username, message, 429)
            return
        if outcome.disabled is not None:
            self._form(req, resp, target, username, outcome.disabled, 403)
            return
        if outcome.user_id is None:
            self._form(req, resp, target, username, "Wrong username or password.", 401)
            return
        session = await self._s.sessions.start(outcome.user_id, replacing=console.session_id)
        set_session_cookie(
            resp,
            secure=self._s.settings.secure_cookies,
            value=session,
            max_age=self._s.sessions.ttl_s,
        )
        logger.info("console sign-in of user %s", outcome.user_id)
        self._s.renderer.redirect(resp, target)

    def _form(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        target: str,
        username: str = "",
        error: str | None = None,
        status: int = 200,
    ) -> None:
        self._s.renderer.page(
            req,
            resp,
            "sign_in.html",
            title="Sign in",
            status=status,
            next=target,
            username=username,
            error=error,
        )


class SignOut:
    """``POST /console/sign-out``: ends this browser's session."""

    def __init__(self, services: ConsoleServices) -> None:
        self._s = services

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        console: ConsoleRequest = req.context.console
        if console.session_id:
            await self._s.sessions.end(console.session_id)
        set_session_cookie(resp, secure=self._s.settings.secure_cookies, value="", max_age=0)
        self._s.renderer.redirect(resp, "/console/sign-in", notice="signed-out")


class Home:
    """``/console``: the memories page."""

    def __init__(self, services: ConsoleServices) -> None:
        self._s = services

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        self._s.renderer.redirect(resp, "/console/memories")


def routes(services: ConsoleServices) -> list[tuple[str, object]]:
    return [
        ("/console", Home(services)),
        ("/console/sign-in", SignIn(services)),
        ("/console/sign-out", SignOut(services)),
    ]
