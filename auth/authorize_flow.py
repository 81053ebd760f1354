"""What ``/oauth/authorize`` does next: one pure decision over what the request showed.

The HTTP resource gathers :class:`AuthorizeFacts` (the parameters, the
form, the client they name, the cookies' values) and calls :func:`decide`.
The answer is either a final :data:`Decision` the resource carries out
(render a page, redirect, start a session, issue a code) or a question it
must answer first (:class:`LookUpSession`, :class:`CheckPassword`): it
does that I/O, adds the result to the facts and asks again. Nothing here
touches the database, the network or the clock, so every branch of the
flow is a row in a table-driven test.

The order of the checks is the security policy (SUPPLEMENT §8): the client
and redirect URI first (until they hold, nothing may go to the redirect
URI), then the other parameters (refusals go back to the client), then,
for a POST, the ``Origin`` header and the CSRF token, and only then the
password or the consent answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from auth import csrf
from auth.authorize import AuthorizationRequest, Params, single, trusted_redirect, validate
from auth.oauth_errors import AuthorizePageError, OAuthError
from auth.throttle import SignIn
from storage.oauth import ClientRow

CSRF_FAILED = "This form expired or did not come from this page. Please sign in again."
SIGN_IN_EXPIRED = "Your sign-in expired. Please sign in again."
WRONG_PASSWORD = "Incorrect username or password."


@dataclass(frozen=True)
class AuthorizeFacts:
    """Everything :func:`decide` may look at; the I/O-bound ones are filled on request."""

    #: The query string's pairs (GET) or the form's pairs (POST), in order.
    params: Params
    #: The registered client the one ``client_id`` names, or None.
    client: ClientRow | None
    #: Our one protected resource (``<public URL>/mcp``).
    resource_url: str
    #: The form's fields, first value of each name; None for a GET.
    form: Mapping[str, str] | None = None
    #: The request's ``Origin`` header, and the origin our pages are served from.
    origin: str | None = None
    own_origin: str = ""
    #: The CSRF cookie's value, if the browser sent one.
    csrf_cookie: str | None = None
    #: Whether the session cookie was looked up (:class:`LookUpSession`), and its user.
    session_checked: bool = False
    session_user: int | None = None
    #: The throttled password check, once made (:class:`CheckPassword`).
    sign_in: SignIn | None = None


# -- questions: I/O the resource performs before asking again -------------------


@dataclass(frozen=True)
class LookUpSession:
    """Find the user of the session cookie; set ``session_checked`` and ``session_user``."""


@dataclass(frozen=True)
class CheckPassword:
    """Check the password behind the throttle; set ``sign_in``."""

    username: str
    password: str


# -- final decisions ---------------------------------------------------------------


@dataclass(frozen=True)
class ErrorPage:
    """An HTML error page for the person; nothing is sent to the client."""

    status: int
    title: str
    message: str
    #: A warning for the log, if this refusal deserves one.
    log: str | None = None


@dataclass(frozen=True)
class ErrorRedirect:
    """Send the person back to the client with ``error``, ``state`` and ``iss``."""

    redirect_uri: str
    error: OAuthError
    state: str | None
    #: Answering a POST (303) rather than a GET (302).
    post: bool
    #: An info line for the log, if any.
    log: str | None = None


@dataclass(frozen=True)
class LoginPage:
    """The sign-in form, with an error above it when ``error`` is set."""

    request: AuthorizationRequest
    status: int
    username: str = ""
    error: str | None = None
    #: The ``Retry-After`` header of a throttled attempt, in seconds.
    retry_after_s: int | None = None
    #: A warning for the log, if any.
    log: str | None = None


@dataclass(frozen=True)
class Proceed:
    """A signed-in user: a code if they already allowed this scope, else the consent page."""

    request: AuthorizationRequest
    user_id: int
    post: bool
    #: The password was just checked: start a session (ending the cookie's old one) first.
    new_session: bool = False


@dataclass(frozen=True)
class AllowConsent:
    """The user allowed the client: remember the consent and redirect with a new code."""

    request: AuthorizationRequest
    user_id: int


Question = LookUpSession | CheckPassword
Decision = ErrorPage | ErrorRedirect | LoginPage | Proceed | AllowConsent


def decide(facts: AuthorizeFacts) -> Question | Decision:
    """The next step of an authorization request (see the module docstring)."""
    try:
        redirect_uri = trusted_redirect(facts.params, facts.client)
    except AuthorizePageError as ex:
        return ErrorPage(
            400,
            "This connection cannot continue",
            ex.description,
            log=f"authorization request refused ({ex.error}): {ex.description}",
        )
    assert facts.client is not None
    form = facts.form
    try:
        request = validate(facts.params, facts.client, redirect_uri, facts.resource_url)
    except OAuthError as ex:
        return ErrorRedirect(redirect_uri, ex, _first(facts.params, "state"), post=form is not None)

    if form is None:
        if "login" in request.prompt:
            return LoginPage(request, 200)
        if not facts.session_checked:
            return LookUpSession()
        if facts.session_user is None:
            return LoginPage(request, 200)
        return Proceed(request, facts.session_user, post=False)

    # A POST: one of our forms. Refuse cross-site submissions first.
    if is_cross_site(facts.origin, facts.own_origin):
        return ErrorPage(403, "Request refused", "The form came from another site.")
    if not csrf.token_matches(facts.csrf_cookie, form.get(csrf.FIELD)):
        return LoginPage(
            request,
            403,
            error=CSRF_FAILED,
            log=f"authorization form without a valid CSRF token (client {request.client.client_id})",
        )

    action = form.get("action")
    if action == "login":
        return _after_password(facts, form, request)
    if action == "consent":
        if not facts.session_checked:
            return LookUpSession()
        user_id = facts.session_user
        if user_id is None:
            return LoginPage(request, 200, error=SIGN_IN_EXPIRED)
        answer = form.get("decision")
        if answer == "allow":
            return AllowConsent(request, user_id)
        if answer == "deny":
            return ErrorRedirect(
                redirect_uri,
                OAuthError("access_denied", "The user denied the request."),
                request.state,
                post=True,
                log=f"user {user_id} denied client {request.client.client_id}",
            )
    return ErrorPage(400, "Bad request", "Submit the form from its page.")


def is_cross_site(origin: str | None, own_origin: str) -> bool:
    """True when a form's ``Origin`` header names a site other than ours (absent or "null" pass)."""
    return origin is not None and origin != "null" and origin.rstrip("/") != own_origin


def _after_password(
    facts: AuthorizeFacts, form: Mapping[str, str], request: AuthorizationRequest
) -> CheckPassword | LoginPage | Proceed:
    username = form.get("username", "")
    outcome = facts.sign_in
    if outcome is None:
        return CheckPassword(username, form.get("password", ""))
    if outcome.disabled is not None:
        return LoginPage(request, 403, username=username, error=outcome.disabled)
    if outcome.retry_after_s is not None:
        wait = outcome.retry_after_s
        return LoginPage(
            request,
            429,
            username=username,
            error=f"Too many failed sign-ins. Wait {wait} seconds and try again.",
            retry_after_s=wait,
        )
    if outcome.user_id is None:
        return LoginPage(request, 400, username=username, error=WRONG_PASSWORD)
    return Proceed(request, outcome.user_id, post=True, new_session=True)


def _first(params: Params, name: str) -> str | None:
    """The one value of ``name``, or None when absent or repeated."""
    try:
        return single(params, name)
    except OAuthError:
        return None
