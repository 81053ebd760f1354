"""The ``/oauth/authorize`` decision, branch by branch: pure, no database, no HTTP."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from auth import csrf
from auth.authorize import (
    consent_given,
    error_answer,
    named_client_id,
    redirect_params,
    validate,
)
from auth.authorize_flow import (
    CSRF_FAILED,
    SIGN_IN_EXPIRED,
    WRONG_PASSWORD,
    AllowConsent,
    AuthorizeFacts,
    CheckPassword,
    ErrorPage,
    ErrorRedirect,
    LoginPage,
    LookUpSession,
    Proceed,
    decide,
    is_cross_site,
)
from auth.oauth_errors import OAuthError
from auth.throttle import SignIn
from tests.auth.samples import CLIENT, REDIRECT, RESOURCE, authorization_params

OWN_ORIGIN = "https://mem.example"
TOKEN = "t" * 43


def _get(params: list[tuple[str, str]] | None = None, **facts: Any) -> AuthorizeFacts:
    facts.setdefault("client", CLIENT)
    return AuthorizeFacts(params=params or authorization_params(), resource_url=RESOURCE, **facts)


def _post(
    form: dict[str, str], params: list[tuple[str, str]] | None = None, **facts: Any
) -> AuthorizeFacts:
    """A POST of one of our forms: a same-site origin and the right CSRF token unless changed."""
    pairs = (params or authorization_params()) + list(form.items())
    fields = {csrf.FIELD: TOKEN, **form}
    facts.setdefault("client", CLIENT)
    facts.setdefault("origin", OWN_ORIGIN)
    facts.setdefault("csrf_cookie", TOKEN)
    return AuthorizeFacts(
        params=pairs, resource_url=RESOURCE, form=fields, own_origin=OWN_ORIGIN, **facts
    )


LOGIN = {"action": "login", "username": "Ann", "password": "pw"}
ALLOW = {"action": "consent", "decision": "allow"}
DENY = {"action": "consent", "decision": "deny"}


def _summary(step: object) -> tuple[Any, ...]:
    """The parts of a decision a row checks (the request it carries is checked apart)."""
    if isinstance(step, ErrorPage):
        return ("error page", step.status, step.title, step.message)
    if isinstance(step, ErrorRedirect):
        return ("error redirect", step.error.error, step.state, step.post)
    if isinstance(step, LoginPage):
        return ("login", step.status, step.username, step.error, step.retry_after_s)
    if isinstance(step, Proceed):
        return ("proceed", step.user_id, step.post, step.new_session)
    if isinstance(step, AllowConsent):
        return ("allow", step.user_id)
    if isinstance(step, CheckPassword):
        return ("check password", step.username, step.password)
    assert isinstance(step, LookUpSession)
    return ("look up session",)


CANNOT_CONTINUE = "This connection cannot continue"
BAD_REQUEST = ("error page", 400, "Bad request", "Submit the form from its page.")
CASES: list[tuple[str, AuthorizeFacts, tuple[Any, ...]]] = [
    # -- client and redirect URI: an error page, nothing sent to the client
    (
        "unknown client",
        _get(client=None),
        (
            "error page",
            400,
            CANNOT_CONTINUE,
            "This application is not registered with OwnSona. Remove the connection from the "
            "application and add it again.",
        ),
    ),
    (
        "no client_id",
        _get(authorization_params(client_id=None), client=None),
        ("error page", 400, CANNOT_CONTINUE, "The request names no client (client_id)."),
    ),
    (
        "unregistered redirect URI",
        _get(authorization_params(redirect_uri="https://evil.example/cb")),
        (
            "error page",
            400,
            CANNOT_CONTINUE,
            "The redirect address in this request is not one the application registered, so "
            "OwnSona will not send you there.",
        ),
    ),
    (
        "unknown client on a POST too",
        _post(LOGIN, client=None),
        (
            "error page",
            400,
            CANNOT_CONTINUE,
            "This application is not registered with OwnSona. Remove the connection from the "
            "application and add it again.",
        ),
    ),
    # -- other parameters: back to the client (302 for a GET, 303 for a POST)
    (
        "bad response_type",
        _get(authorization_params(response_type="token")),
        ("error redirect", "unsupported_response_type", "s", False),
    ),
    (
        "repeated state is not echoed",
        _get(authorization_params() + [("state", "t")]),
        ("error redirect", "invalid_request", None, False),
    ),
    (
        "bad parameter in a POST",
        _post(LOGIN, authorization_params(code_challenge=None)),
        ("error redirect", "invalid_request", "s", True),
    ),
    # -- GET: the session decides between the sign-in page and going on
    ("GET asks for the session", _get(), ("look up session",)),
    (
        "GET without a session",
        _get(session_checked=True),
        ("login", 200, "", None, None),
    ),
    (
        "GET signed in",
        _get(session_checked=True, session_user=7),
        ("proceed", 7, False, False),
    ),
    (
        "prompt=login ignores the session",
        _get(authorization_params(prompt="login"), session_checked=True, session_user=7),
        ("login", 200, "", None, None),
    ),
    (
        "prompt=login does not even ask",
        _get(authorization_params(prompt="login")),
        ("login", 200, "", None, None),
    ),
    # -- POST: Origin first, then CSRF
    (
        "cross-site form",
        _post(LOGIN, origin="https://evil.example"),
        ("error page", 403, "Request refused", "The form came from another site."),
    ),
    (
        "cross-site wins over a bad CSRF token",
        _post(LOGIN, origin="https://evil.example", csrf_cookie=None),
        ("error page", 403, "Request refused", "The form came from another site."),
    ),
    (
        "no CSRF cookie",
        _post(LOGIN, csrf_cookie=None),
        ("login", 403, "", CSRF_FAILED, None),
    ),
    (
        "CSRF token mismatch",
        _post(LOGIN, csrf_cookie="u" * 43),
        ("login", 403, "", CSRF_FAILED, None),
    ),
    (
        "Origin null passes",
        _post(LOGIN, origin="null"),
        ("check password", "Ann", "pw"),
    ),
    (
        "no Origin passes",
        _post(LOGIN, origin=None),
        ("check password", "Ann", "pw"),
    ),
    (
        "own origin with a slash passes",
        _post(LOGIN, origin=OWN_ORIGIN + "/"),
        ("check password", "Ann", "pw"),
    ),
    # -- sign-in
    (
        "disabled account",
        _post(LOGIN, sign_in=SignIn(disabled="This account is disabled.")),
        ("login", 403, "Ann", "This account is disabled.", None),
    ),
    (
        "throttled",
        _post(LOGIN, sign_in=SignIn(retry_after_s=30)),
        ("login", 429, "Ann", "Too many failed sign-ins. Wait 30 seconds and try again.", 30),
    ),
    (
        "wrong password",
        _post(LOGIN, sign_in=SignIn()),
        ("login", 400, "Ann", WRONG_PASSWORD, None),
    ),
    (
        "signed in: a new session, then on",
        _post(LOGIN, sign_in=SignIn(user_id=5)),
        ("proceed", 5, True, True),
    ),
    (
        "missing username and password are empty",
        _post({"action": "login"}),
        ("check password", "", ""),
    ),
    # -- consent
    ("consent asks for the session", _post(ALLOW), ("look up session",)),
    (
        "consent after the session expired",
        _post(ALLOW, session_checked=True),
        ("login", 200, "", SIGN_IN_EXPIRED, None),
    ),
    (
        "allow",
        _post(ALLOW, session_checked=True, session_user=5),
        ("allow", 5),
    ),
    (
        "deny",
        _post(DENY, session_checked=True, session_user=5),
        ("error redirect", "access_denied", "s", True),
    ),
    (
        "consent with another answer",
        _post({"action": "consent", "decision": "maybe"}, session_checked=True, session_user=5),
        BAD_REQUEST,
    ),
    ("unknown action", _post({"action": "dance"}), BAD_REQUEST),
    ("no action", _post({}), BAD_REQUEST),
]


@pytest.mark.parametrize(("facts", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_decide(facts: AuthorizeFacts, expected: tuple[Any, ...]) -> None:
    assert _summary(decide(facts)) == expected


def test_the_request_carried_is_the_validated_one() -> None:
    step = decide(
        _get(authorization_params(scope="memory:read"), session_checked=True, session_user=7)
    )
    assert isinstance(step, Proceed)
    assert step.request == validate(
        authorization_params(scope="memory:read"), CLIENT, REDIRECT, RESOURCE
    )
    assert step.request.scope == "memory:read"


def test_refusals_worth_a_line_say_why() -> None:
    page = decide(_get(client=None))
    assert isinstance(page, ErrorPage)
    assert page.log is not None and page.log.startswith(
        "authorization request refused (invalid_client)"
    )
    forged = decide(_post(LOGIN, csrf_cookie=None))
    assert isinstance(forged, LoginPage)
    assert forged.log == "authorization form without a valid CSRF token (client c1)"
    denied = decide(_post(DENY, session_checked=True, session_user=5))
    assert isinstance(denied, ErrorRedirect)
    assert denied.log == "user 5 denied client c1"
    assert denied.redirect_uri == REDIRECT
    wrong = decide(_post(LOGIN, sign_in=SignIn()))
    assert isinstance(wrong, LoginPage) and wrong.log is None


def test_answering_the_questions_reaches_a_decision() -> None:
    """The resource's loop: each question, answered, leads on; none is asked twice."""
    facts = _post(LOGIN)
    step = decide(facts)
    assert isinstance(step, CheckPassword)
    facts = dataclasses.replace(facts, sign_in=SignIn(user_id=3))
    assert _summary(decide(facts)) == ("proceed", 3, True, True)


@pytest.mark.parametrize(
    ("origin", "cross"),
    [
        (None, False),
        ("null", False),
        (OWN_ORIGIN, False),
        (OWN_ORIGIN + "/", False),
        ("http://mem.example", True),
        ("https://mem.example:8443", True),
        ("https://evil.example", True),
    ],
)
def test_is_cross_site(origin: str | None, cross: bool) -> None:
    assert is_cross_site(origin, OWN_ORIGIN) is cross


@pytest.mark.parametrize(
    ("scope", "prompt", "allowed", "given"),
    [
        ("memory:read", None, "memory:read memory:write", True),
        ("memory:read memory:write", None, "memory:read memory:write", True),
        ("memory:read memory:write", None, "memory:read", False),
        ("memory:read", None, None, False),
        ("memory:read", "consent", "memory:read memory:write", False),
        ("memory:read", "login", "memory:read", True),
    ],
)
def test_consent_given(scope: str, prompt: str | None, allowed: str | None, given: bool) -> None:
    request = validate(authorization_params(scope=scope, prompt=prompt), CLIENT, REDIRECT, RESOURCE)
    assert consent_given(request, allowed) is given


@pytest.mark.parametrize(
    "loopback", ["http://127.0.0.1:53121/callback", "http://localhost:8976/cb", "http://[::1]:9/x"]
)
def test_a_remembered_consent_never_skips_the_page_for_a_loopback_redirect(loopback: str) -> None:
    # A program on this machine could otherwise get a code silently under a public client id.
    client = dataclasses.replace(CLIENT, redirect_uris=[loopback])
    params = authorization_params(scope="memory:read", redirect_uri=loopback)
    request = validate(params, client, loopback, RESOURCE)
    assert consent_given(request, "memory:read memory:write") is False


def test_redirect_params_end_with_state_then_iss() -> None:
    iss = "https://mem.example"
    assert list(redirect_params({"code": "c"}, "s", iss).items()) == [
        ("code", "c"),
        ("state", "s"),
        ("iss", iss),
    ]
    denied = error_answer(OAuthError("access_denied", "No."))
    assert redirect_params(denied, None, iss) == {
        "error": "access_denied",
        "error_description": "No.",
        "iss": iss,
    }


@pytest.mark.parametrize(
    ("params", "client_id"),
    [
        ([("client_id", "c1")], "c1"),
        ([], None),
        ([("client_id", "c1"), ("client_id", "c2")], None),
        ([("client_id", "")], ""),
    ],
)
def test_named_client_id(params: list[tuple[str, str]], client_id: str | None) -> None:
    assert named_client_id(params) == client_id
