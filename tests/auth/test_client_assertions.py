"""auth.client_assertions: what a private_key_jwt assertion must be (pure; replay is in the API tests)."""

from __future__ import annotations

import time
import warnings
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import OctKey

from auth.client_assertions import (
    MAX_LIFETIME_S,
    UnknownKey,
    unverified_issuer,
    verify_assertion,
)
from auth.oauth_errors import OAuthError
from tests.auth.assertion_keys import ClientKey

CLIENT = "https://chatgpt.com/oauth/client.json"
TOKEN_ENDPOINT = "https://mem.example/oauth/token"
AUDIENCES = ("https://mem.example", TOKEN_ENDPOINT)


@pytest.fixture(scope="module")
def rsa() -> ClientKey:
    return ClientKey("RS256")


def _verify(assertion: str, jwks: dict[str, Any]) -> Any:
    return verify_assertion(assertion, jwks, client_id=CLIENT, audiences=AUDIENCES, now=time.time())


@pytest.mark.parametrize("alg", ["RS256", "PS256", "ES256", "Ed25519"])
def test_every_advertised_algorithm_verifies(alg: str) -> None:
    key = ClientKey(alg)
    verified = _verify(key.sign(CLIENT, TOKEN_ENDPOINT, jti="one"), key.jwks())
    assert verified.jti == "one"


@pytest.mark.parametrize("audience", [TOKEN_ENDPOINT, "https://mem.example", [TOKEN_ENDPOINT, "x"]])
def test_the_audience_may_be_the_token_endpoint_or_the_issuer(
    rsa: ClientKey, audience: Any
) -> None:
    _verify(rsa.sign(CLIENT, audience), rsa.jwks())


def test_valid_until_is_exp_plus_leeway(rsa: ClientKey) -> None:
    exp = int(time.time()) + 60
    assert _verify(rsa.sign(CLIENT, TOKEN_ENDPOINT, exp=exp), rsa.jwks()).valid_until == exp + 30


class _Offset:
    """A time claim relative to the moment the test runs."""

    def __init__(self, seconds: int) -> None:
        self.seconds = seconds

    def at(self, now: int) -> int:
        return now + self.seconds


def Ahead(seconds: int) -> _Offset:  # noqa: N802 - reads as a value in the table
    return _Offset(seconds)


def Ago(seconds: int) -> _Offset:  # noqa: N802
    return _Offset(-seconds)


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"aud": "https://other.example/oauth/token"}, "aud must name this server"),
        ({"aud": None}, "aud must name this server"),
        ({"iss": "https://evil.example/c.json"}, "iss and sub"),
        ({"sub": "someone-else"}, "iss and sub"),
        ({"exp": None}, "must carry exp"),
        ({"exp": Ago(120)}, "expired"),
        ({"exp": Ahead(MAX_LIFETIME_S + 120)}, "too far ahead"),
        ({"exp": "tomorrow"}, "must carry exp"),
        ({"nbf": Ahead(300)}, "nbf is in the future"),
        ({"iat": Ahead(300)}, "iat is in the future"),
        ({"jti": None}, "must carry a jti"),
        ({"jti": ""}, "must carry a jti"),
    ],
)
def test_bad_claims_are_refused(rsa: ClientKey, claims: dict[str, Any], reason: str) -> None:
    # Times are taken when the test runs, not when pytest collected it minutes earlier.
    now = int(time.time())
    claims = {k: v.at(now) if isinstance(v, _Offset) else v for k, v in claims.items()}
    with pytest.raises(OAuthError) as caught:
        _verify(rsa.sign(CLIENT, TOKEN_ENDPOINT, **claims), rsa.jwks())
    assert caught.value.error == "invalid_client" and caught.value.status == 401
    assert reason in caught.value.description


def test_another_key_is_refused(rsa: ClientKey) -> None:
    impostor = ClientKey("RS256", kid="key-1")  # same kid, other key
    with pytest.raises(OAuthError, match="not valid"):
        _verify(impostor.sign(CLIENT, TOKEN_ENDPOINT), rsa.jwks())


def test_an_unknown_key_id_says_so(rsa: ClientKey) -> None:
    other = ClientKey("RS256", kid="key-2")
    with pytest.raises(UnknownKey):
        _verify(other.sign(CLIENT, TOKEN_ENDPOINT), rsa.jwks())


def test_symmetric_and_unsigned_assertions_are_refused() -> None:
    secret = OctKey.generate_key(256, parameters={"kid": "k"})
    jwks = {"keys": [secret.as_dict(private=True)]}
    now = int(time.time())
    claims = {"iss": CLIENT, "sub": CLIENT, "aud": TOKEN_ENDPOINT, "exp": now + 60, "jti": "j"}
    hs256 = jwt.encode({"alg": "HS256", "kid": "k"}, claims, secret, algorithms=["HS256"])
    with pytest.raises(OAuthError, match="not valid"):
        _verify(hs256, jwks)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # joserfc warns about "none", rightly
        unsigned = jwt.encode({"alg": "none"}, claims, None, algorithms=["none"])
    with pytest.raises(OAuthError):
        _verify(unsigned, jwks)


def test_garbage_is_refused(rsa: ClientKey) -> None:
    for value in ("not-a-jwt", "a.b.c", "x" * 9000):
        with pytest.raises(OAuthError):
            _verify(value, rsa.jwks())
    with pytest.raises(OAuthError, match="JWK set"):
        _verify(rsa.sign(CLIENT, TOKEN_ENDPOINT), {"keys": [{"kty": "nope"}]})


def test_unverified_issuer(rsa: ClientKey) -> None:
    assert unverified_issuer(rsa.sign(CLIENT, TOKEN_ENDPOINT)) == CLIENT
    assert unverified_issuer("a.b.c") is None
    assert unverified_issuer("nonsense") is None


def test_deprecated_eddsa_is_refused() -> None:
    key = ClientKey("Ed25519")
    now = int(time.time())
    claims = {"iss": CLIENT, "sub": CLIENT, "aud": TOKEN_ENDPOINT, "exp": now + 60, "jti": "j"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eddsa = jwt.encode({"alg": "EdDSA", "kid": key.kid}, claims, key.key, algorithms=["EdDSA"])
    with pytest.raises(OAuthError, match="not valid"):
        _verify(eddsa, key.jwks())
