"""Every ``/console`` request passes here first: sign-in, CSRF, security headers.

- **Sign-in**: the session cookie of the OAuth login pages (one sign-in for
  both). A signed-out GET is sent to ``/console/sign-in?next=<where it was
  going>``; any other signed-out request is refused with 401.
- **CSRF**: every request that is not GET or HEAD must carry the browser's
  CSRF token (the double-submit cookie of :mod:`auth.csrf`) in the form field
  ``csrf_token`` or the ``X-CSRF-Token`` header, and must not come from
  another site (``Origin``, ``Sec-Fetch-Site``). A refusal changes nothing:
  no resource runs.
- **Headers**: a strict Content-Security-Policy (our own scripts, styles and
  images only; no inline script; no third-party requests), no framing,
  ``no-store`` on pages.

The form body is read here (bounded), so resources find it parsed in
``req.context.console.form`` (``files`` for uploads).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import falcon
import falcon.asgi

from api.console.render import Renderer
from api.errors import NO_STORE
from auth import csrf
from auth.opaque import new_secret, presentable
from auth.sessions import Sessions, SignedIn, cookie_names

logger = logging.getLogger("ownsona.api.console")

PREFIX = "/console"
SIGN_IN_PATH = PREFIX + "/sign-in"
STATIC_PREFIX = PREFIX + "/static/"
CSRF_HEADER = "X-CSRF-Token"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: The only console routes that take uploads (an export, a chat export), signed in only;
#: every other console form is small.
UPLOAD_PATHS = frozenset({PREFIX + "/account/import", PREFIX + "/account/import-chat"})
#: Largest body of any other console form (a bulk form of 200 ids is a few KB).
FORM_MAX_BYTES = 256 * 1024
_FORM = "application/x-www-form-urlencoded"
_MULTIPART = "multipart/form-data"

#: Only our own origin's resources; no inline script or style anywhere in the console.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


@dataclass(frozen=True)
class Upload:
    """A file sent in a multipart form."""

    filename: str
    content_type: str
    data: bytes


@dataclass
class ConsoleRequest:
    """What the guard learned of a console request: ``req.context.console``."""

    #: The signed-in account; None only on the sign-in page and static files.
    account: SignedIn | None
    #: The browser's CSRF token, to embed in the next form (set as a cookie if new).
    csrf_token: str
    #: The raw session cookie (sign-out ends it).
    session_id: str | None = None
    #: The form fields of a POST, each with every value it was sent with.
    form: dict[str, list[str]] = field(default_factory=dict)
    files: dict[str, Upload] = field(default_factory=dict)

    @property
    def user_id(self) -> int:
        assert self.account is not None, "a signed-in page asked for its user"
        return self.account.user_id

    def value(self, name: str, default: str = "") -> str:
        """The first value of form field ``name``."""
        values = self.form.get(name)
        return values[0] if values else default

    def values(self, name: str) -> list[str]:
        return list(self.form.get(name, []))


class ConsoleGuard:
    """Falcon middleware for every path under ``/console``."""

    def __init__(
        self,
        sessions: Sessions,
        renderer: Renderer,
        *,
        public_url: str,
        secure_cookies: bool,
        max_upload_bytes: int,
    ) -> None:
        self._sessions = sessions
        self._renderer = renderer
        self._cookies = cookie_names(secure_cookies)
        self._secure = secure_cookies
        self._own_origin = _origin(public_url)
        self._max_upload = max_upload_bytes

    async def process_request(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        if not _is_console(req.path):
            return
        if req.path.startswith(STATIC_PREFIX):
            return
        token = _first_cookie(req, self._cookies.csrf)
        if not presentable(token):
            token = csrf.new_token()
            resp.set_cookie(
                self._cookies.csrf,
                token,
                path="/",
                secure=self._secure,
                http_only=True,
                same_site="Lax",
            )
        session_id = _first_cookie(req, self._cookies.session)
        console = ConsoleRequest(account=None, csrf_token=token, session_id=session_id)
        req.context.console = console
        # Who is asking comes first: a signed-out request's body is never read.
        console.account = await self._sessions.account(session_id)
        if console.account is None and req.path != SIGN_IN_PATH:
            self._signed_out(req, resp)
            return
        if req.method not in _SAFE_METHODS:
            await self._check_state_change(req, resp, console)

    async def process_response(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, resource: Any, ok: bool
    ) -> None:
        if not _is_console(req.path):
            return
        resp.set_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        resp.set_header("X-Frame-Options", "DENY")
        resp.set_header("X-Content-Type-Options", "nosniff")
        # same-origin: our own forms' Origin and Referer stay ours, nothing leaks to links out.
        resp.set_header("Referrer-Policy", "same-origin")
        resp.set_header("Cross-Origin-Opener-Policy", "same-origin")
        resp.set_header("Cross-Origin-Resource-Policy", "same-origin")
        if not req.path.startswith(STATIC_PREFIX):
            for name, value in NO_STORE.items():
                resp.set_header(name, value)

    async def _check_state_change(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, console: ConsoleRequest
    ) -> None:
        """Read the form; refuse (403, nothing done) without a valid token from our own site."""
        if not self._same_site(req):
            self._refuse(req, resp, "This request came from another site and was refused.")
            return
        try:
            await self._read_form(req, console)
        except _BadForm as ex:
            self._renderer.error(req, resp, ex.status, "The form could not be read", ex.message)
            resp.complete = True
            return
        sent = req.get_header(CSRF_HEADER) or console.value(csrf.FIELD) or None
        if not csrf.token_matches(_first_cookie(req, self._cookies.csrf), sent):
            self._refuse(
                req, resp, "This form has expired. Go back, reload the page and try again."
            )

    def _same_site(self, req: falcon.asgi.Request) -> bool:
        if (req.get_header("Sec-Fetch-Site") or "").lower() == "cross-site":
            return False
        origin = req.get_header("Origin")
        if origin is None or origin == "null":
            return True  # the token decides
        return origin in (self._own_origin, f"{req.scheme}://{req.netloc}")

    def _refuse(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, message: str) -> None:
        logger.warning("console %s %s refused: no valid CSRF token or origin", req.method, req.path)
        self._renderer.error(req, resp, 403, "Request refused", message)
        resp.complete = True

    def _signed_out(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        if req.method in ("GET", "HEAD"):
            target = req.path + (f"?{req.query_string}" if req.query_string else "")
            resp.status = falcon.HTTP_303
            resp.set_header(
                "Location",
                self._renderer.url(SIGN_IN_PATH) + "?next=" + quote(target, safe="/"),
            )
            resp.data = b""
        else:
            self._renderer.error(
                req, resp, 401, "Signed out", "Your sign-in has ended. Sign in again to continue."
            )
        resp.complete = True

    async def _read_form(self, req: falcon.asgi.Request, console: ConsoleRequest) -> None:
        cap = self._max_upload if req.path in UPLOAD_PATHS else FORM_MAX_BYTES
        length = req.content_length
        if length is not None and length > cap:
            raise _BadForm(413, f"The form is larger than {cap} bytes.")
        body = await _read_capped(req, cap)
        media = (req.content_type or "").split(";")[0].strip().lower()
        if media == _FORM:
            for name, value in parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True):
                console.form.setdefault(name, []).append(value)
        elif media == _MULTIPART:
            # Parsing a large upload takes seconds: off the event loop, which serves everyone.
            await asyncio.to_thread(_parse_multipart, req.content_type or "", body, console)
        elif body:
            raise _BadForm(415, "Send the form from its page.")


class _BadForm(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


async def _read_capped(req: falcon.asgi.Request, cap: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in req.stream:
        size += len(chunk)
        if size > cap:
            raise _BadForm(413, f"The form is larger than {cap} bytes.")
        chunks.append(chunk)
    return b"".join(chunks)


def _parse_multipart(content_type: str, body: bytes, console: ConsoleRequest) -> None:
    """A multipart/form-data body into ``form`` (text fields) and ``files`` (uploads)."""
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1", "replace")
    message = BytesParser(policy=HTTP).parsebytes(head + body)
    if not message.is_multipart():
        raise _BadForm(400, "The upload is not a multipart form.")
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        data = part.get_payload(decode=True)
        payload = data if isinstance(data, bytes) else b""
        filename = part.get_filename()
        if filename is not None:
            console.files[name] = Upload(filename, part.get_content_type(), payload)
        else:
            console.form.setdefault(name, []).append(payload.decode("utf-8", "replace"))


def set_session_cookie(
    resp: falcon.asgi.Response, *, secure: bool, value: str, max_age: int
) -> None:
    """The sign-in session's cookie (the OAuth pages' own); ``max_age=0`` ends it.

    Secure is kept when expiring it too, or a browser ignores the change for a __Host- name.
    """
    resp.set_cookie(
        cookie_names(secure).session,
        value,
        max_age=max_age,
        path="/",
        secure=secure,
        http_only=True,
        same_site="Lax",
    )


def _is_console(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


def _first_cookie(req: falcon.asgi.Request, name: str) -> str | None:
    values = req.get_cookie_values(name)
    return values[0] if values else None


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a console path of ours, else the memories page."""
    if (
        target
        and target.startswith(PREFIX)
        and not target.startswith("//")
        and "\\" not in target
        and all(ord(ch) > 31 for ch in target)
    ):
        return target
    return PREFIX + "/memories"


def new_operation_key() -> str:
    """A form's idempotency key: the same form submitted twice is one operation."""
    return "console-" + new_secret()
