"""WWW-Authenticate values and header parsing that needs no key (auth.bearer)."""

from __future__ import annotations

import pytest

from auth.bearer import BearerValidator, www_authenticate
from auth.errors import BearerError
from config.settings import Settings

SETTINGS = Settings(public_url="https://mem.example")
METADATA = 'resource_metadata="https://mem.example/.well-known/oauth-protected-resource"'
#: Every challenge names the scopes to ask for (MCP Authorization, "Scope Selection Strategy").
SCOPE = 'scope="memory:read memory:write"'


def test_challenge_without_token_has_no_error():
    value = www_authenticate(SETTINGS, BearerError(401, None, "Authorization required"))
    assert value == f"Bearer {METADATA}, {SCOPE}"


def test_challenge_with_invalid_token():
    value = www_authenticate(SETTINGS, BearerError(401, "invalid_token", "token expired"))
    assert value == (
        f'Bearer {METADATA}, error="invalid_token", error_description="token expired", {SCOPE}'
    )


def test_challenge_cannot_break_out_of_quotes():
    error = BearerError(401, "invalid_token", 'say "hi"\\\r\nSet-Cookie: x=1 é')
    value = www_authenticate(SETTINGS, error)
    assert "\r" not in value and "\n" not in value
    assert value.endswith(f"error_description=\"say 'hi'???Set-Cookie: x=1 ?\", {SCOPE}")


def test_challenge_names_the_scope():
    error = BearerError(403, "insufficient_scope", "needs write", scope="memory:write")
    assert www_authenticate(SETTINGS, error).endswith(
        'error="insufficient_scope", error_description="needs write", scope="memory:write"'
    )


def test_metadata_url_is_quoted():
    settings = Settings(public_url='https://mem.example/a"b')
    value = www_authenticate(settings, BearerError(401, None, "Authorization required"))
    assert value == (
        'Bearer resource_metadata="https://mem.example/a\\"b/.well-known/oauth-protected-resource", '
        + SCOPE
    )


@pytest.mark.parametrize("header", [None, "", "   "])
async def test_missing_header_asks_for_authorization(header):
    validator = BearerValidator(keystore=None, settings=SETTINGS)  # type: ignore[arg-type]
    with pytest.raises(BearerError) as caught:
        await validator.validate(header)
    assert (caught.value.status, caught.value.error) == (401, None)
    assert caught.value.description == "Authorization required"


@pytest.mark.parametrize(
    "header",
    [
        "Basic dXNlcjpwYXNz",
        "Bearer",
        "Bearer ",
        "Bearer a b",
        "Token abc",
        "Bearer a,b",
        "Bearerabc",
    ],
)
async def test_other_schemes_and_shapes_are_invalid_tokens(header):
    validator = BearerValidator(keystore=None, settings=SETTINGS)  # type: ignore[arg-type]
    with pytest.raises(BearerError) as caught:
        await validator.validate(header)
    assert (caught.value.status, caught.value.error) == (401, "invalid_token")
