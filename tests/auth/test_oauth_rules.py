"""Pure OAuth rules: PKCE, redirect URIs, scopes, authorization-request validation."""

from __future__ import annotations

import pytest

from auth.authorize import trusted_redirect, validate
from auth.oauth_errors import AuthorizePageError, OAuthError
from auth.pkce import challenge_problem, s256, verifier_matches
from auth.redirects import redirect_uri_problem, with_params
from auth.scopes import canonical, parse_scope
from tests.auth.samples import CLIENT, RESOURCE, RFC_CHALLENGE, RFC_VERIFIER, authorization_params


def test_s256_matches_rfc_7636_appendix_b() -> None:
    assert s256(RFC_VERIFIER) == RFC_CHALLENGE
    assert verifier_matches(RFC_VERIFIER, RFC_CHALLENGE)
    assert not verifier_matches(RFC_VERIFIER[:-1] + "x", RFC_CHALLENGE)
    assert not verifier_matches("short", s256("short"))  # under 43 characters
    assert not verifier_matches(None, RFC_CHALLENGE)
    assert not verifier_matches("a" * 129, s256("a" * 129))


@pytest.mark.parametrize(
    ("challenge", "method", "ok"),
    [
        (RFC_CHALLENGE, "S256", True),
        (RFC_CHALLENGE, "plain", False),
        (RFC_CHALLENGE, None, False),
        (RFC_CHALLENGE, "s256", False),
        (None, "S256", False),
        ("x" * 42, "S256", False),
        (RFC_CHALLENGE + "=", "S256", False),
    ],
)
def test_challenge_rules(challenge: str | None, method: str | None, ok: bool) -> None:
    assert (challenge_problem(challenge, method) is None) is ok


@pytest.mark.parametrize(
    "uri",
    [
        "https://claude.ai/api/mcp/auth_callback",
        "https://claude.com/api/mcp/auth_callback",
        "https://chatgpt.com/connector_platform_oauth_redirect",
        "http://localhost:6274/oauth/callback",
        "http://localhost:53127/callback",
        "http://127.0.0.1:3000/callback",
        "http://[::1]:8080/cb",
        "https://app.example/cb?tenant=1",
    ],
)
def test_redirect_uris_real_clients_use_are_accepted(uri: str) -> None:
    assert redirect_uri_problem(uri) is None


@pytest.mark.parametrize(
    "uri",
    [
        "http://claude.ai/api/mcp/auth_callback",
        "http://localhost.evil.example/cb",
        "javascript:alert(1)",
        "data:text/html,hi",
        "https://a.example/cb#x",
        "https://user:pw@a.example/cb",
        "/relative",
        "https://",
        "https://a.example/c b",
        "https://a.example:99999/cb",
        42,
    ],
)
def test_dangerous_redirect_uris_are_refused(uri: object) -> None:
    assert redirect_uri_problem(uri) is not None


def test_with_params_keeps_the_existing_query() -> None:
    assert with_params("https://a.example/cb?x=1", {"code": "c d", "state": "s"}) == (
        "https://a.example/cb?x=1&code=c+d&state=s"
    )


def test_scope_helpers() -> None:
    assert parse_scope(" memory:write  memory:read memory:write ") == [
        "memory:write",
        "memory:read",
    ]
    assert canonical(["memory:write", "other", "memory:read"]) == "memory:read memory:write"
    assert canonical([]) == ""


def test_defaults_scope_and_resource() -> None:
    request = validate(authorization_params(), CLIENT, CLIENT.redirect_uris[0], RESOURCE)
    assert request.scope == "memory:read memory:write"
    assert request.resource == RESOURCE and request.state == "s"


def test_repeated_parameters_are_refused() -> None:
    params = authorization_params() + [("client_id", "c1")]
    with pytest.raises(AuthorizePageError):
        trusted_redirect(params, CLIENT)
    with pytest.raises(OAuthError) as caught:
        validate(
            authorization_params() + [("state", "t")], CLIENT, CLIENT.redirect_uris[0], RESOURCE
        )
    assert caught.value.error == "invalid_request"


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"response_type": "token"}, "unsupported_response_type"),
        ({"response_type": None}, "invalid_request"),
        ({"scope": "admin"}, "invalid_scope"),
        ({"resource": "https://mem.example/other"}, "invalid_target"),
        ({"response_mode": "fragment"}, "invalid_request"),
        ({"state": "bad\nstate"}, "invalid_request"),
    ],
)
def test_request_errors(changes: dict[str, str | None], error: str) -> None:
    with pytest.raises(OAuthError) as caught:
        validate(authorization_params(**changes), CLIENT, CLIENT.redirect_uris[0], RESOURCE)
    assert caught.value.error == error
    assert not isinstance(caught.value, AuthorizePageError)


def test_resource_with_trailing_slash_is_ours() -> None:
    request = validate(
        authorization_params(resource=RESOURCE + "/"), CLIENT, CLIENT.redirect_uris[0], RESOURCE
    )
    assert request.resource == RESOURCE


async def test_oauth_error_survives_async_with() -> None:
    """contextlib sets __traceback__ on the way out; a frozen dataclass must allow it."""
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def block():  # type: ignore[no-untyped-def]
        yield

    with pytest.raises(OAuthError) as caught:
        async with block():
            raise OAuthError("invalid_grant", "x")
    assert str(caught.value) == "invalid_grant: x"
    with pytest.raises(AttributeError):
        caught.value.error = "invalid_request"  # type: ignore[misc]
