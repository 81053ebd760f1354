"""Access-token issuing and verification (auth.tokens) with real keys from PostgreSQL."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import statistics
import time

import pytest
from joserfc import jws, jwt
from joserfc.jwk import RSAKey

from auth.bearer import BearerValidator
from auth.errors import BearerError
from auth.tokens import LEEWAY_S, Principal, issue_access_token, verify_access_token

NOW = 1_800_000_000


def _b64(data: bytes | dict) -> str:
    raw = json.dumps(data).encode() if isinstance(data, dict) else data
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _claims(settings, **changes):
    claims = {
        "iss": settings.issuer,
        "aud": settings.resource_url,
        "sub": "7",
        "client_id": "client-1",
        "scope": "memory",
        "iat": NOW,
        "exp": NOW + 3600,
        "jti": "j-1",
    }
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not None}


def _sign(key: RSAKey, claims: dict, **header) -> str:
    header = {"alg": "RS256", "kid": key.kid, "typ": "at+jwt", **header}
    header = {k: v for k, v in header.items() if v is not None}
    return jwt.encode(header, claims, key, algorithms=["RS256"])


async def _refused(
    keystore, settings, token, reason: str | None = None, now: float = NOW
) -> BearerError:
    with pytest.raises(BearerError) as caught:
        await verify_access_token(keystore, settings, token, now=now)
    error = caught.value
    assert (error.status, error.error) == (401, "invalid_token")
    if reason is not None:
        assert error.description == reason
    return error


async def test_round_trip(keystore, settings):
    token = issue_access_token(
        keystore, settings, user_id=42, client_id="client-1", scope="memory offline_access", now=NOW
    )
    principal = await verify_access_token(keystore, settings, token, now=NOW + 10)
    assert principal == Principal(
        user_id=42,
        client_id="client-1",
        scopes=frozenset({"memory", "offline_access"}),
        jti=principal.jti,
        expires_at=NOW + settings.access_token_ttl_s,
        issued_at=NOW,
    )
    assert len(principal.jti) >= 16


async def test_claims_and_header(keystore, settings):
    token = issue_access_token(
        keystore, settings, user_id=42, client_id="c", scope="memory", ttl_s=60, now=NOW
    )
    header_segment, payload_segment, _ = token.split(".")
    header = json.loads(base64.urlsafe_b64decode(header_segment + "=="))
    claims = json.loads(base64.urlsafe_b64decode(payload_segment + "=="))
    assert header == {"typ": "at+jwt", "alg": "RS256", "kid": keystore.signing_key().kid}
    assert claims["iss"] == "https://mem.example"
    assert claims["aud"] == "https://mem.example/mcp"
    assert (claims["sub"], claims["client_id"], claims["scope"]) == ("42", "c", "memory")
    assert (claims["iat"], claims["exp"]) == (NOW, NOW + 60)
    other = issue_access_token(
        keystore, settings, user_id=42, client_id="c", scope="memory", now=NOW
    )
    assert json.loads(base64.urlsafe_b64decode(other.split(".")[1] + "=="))["jti"] != claims["jti"]


async def test_unsigned_token_is_refused(keystore, settings):
    header = {"alg": "none", "typ": "at+jwt", "kid": keystore.signing_key().kid}
    token = f"{_b64(header)}.{_b64(_claims(settings))}."
    await _refused(keystore, settings, token, "unsupported algorithm")
    for alg in ("None", "NONE", "RS512", "PS256", "ES256", None):
        header = {"alg": alg, "typ": "at+jwt", "kid": keystore.signing_key().kid}
        await _refused(keystore, settings, f"{_b64(header)}.{_b64(_claims(settings))}.c2ln")


async def test_hs256_signed_with_the_public_key_is_refused(keystore, settings):
    """Algorithm confusion: an HMAC keyed with the published RSA key must not verify."""
    key = keystore.signing_key()
    jwk = keystore.jwks()["keys"][0]
    header = {"alg": "HS256", "typ": "at+jwt", "kid": key.kid}
    signing_input = f"{_b64(header)}.{_b64(_claims(settings))}"
    for secret in (key.as_pem(private=False), json.dumps(jwk).encode(), jwk["n"].encode()):
        mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
        await _refused(keystore, settings, f"{signing_input}.{_b64(mac)}", "unsupported algorithm")


async def test_wrong_signature_is_refused(keystore, settings):
    good = _sign(keystore.signing_key(), _claims(settings))
    head, payload, signature = good.split(".")
    # Same header and claims, another key's signature under our kid.
    stranger = RSAKey.generate_key(2048, private=True)
    forged = _sign(stranger, _claims(settings), kid=keystore.signing_key().kid)
    await _refused(keystore, settings, forged, "bad signature")
    # Claims changed after signing.
    tampered = f"{head}.{_b64(_claims(settings, sub='8'))}.{signature}"
    await _refused(keystore, settings, tampered, "bad signature")
    # Signature bytes damaged.
    flipped = signature[:10] + ("A" if signature[10] != "A" else "B") + signature[11:]
    await _refused(keystore, settings, f"{head}.{payload}.{flipped}", "bad signature")
    await _refused(keystore, settings, f"{head}.{payload}.", "bad signature")
    await _refused(keystore, settings, f"{head}.{payload}.!!!", None)


async def test_unknown_kid_is_refused(keystore, settings):
    stranger = RSAKey.generate_key(2048, private=True, auto_kid=True)
    await _refused(keystore, settings, _sign(stranger, _claims(settings)), "unknown signing key")
    no_kid = _sign(keystore.signing_key(), _claims(settings), kid=None)
    await _refused(keystore, settings, no_kid, "missing key id")


async def test_wrong_audience_is_refused(keystore, settings):
    key = keystore.signing_key()
    for audience in ("https://other.example/mcp", ["https://mem.example"], None, 7, [7]):
        token = _sign(key, _claims(settings, aud=audience))
        await _refused(keystore, settings, token, "wrong audience")
    # A list that contains the resource is fine.
    listed = _sign(key, _claims(settings, aud=["https://x.example", settings.resource_url]))
    assert (await verify_access_token(keystore, settings, listed, now=NOW)).user_id == 7


async def test_wrong_issuer_is_refused(keystore, settings):
    key = keystore.signing_key()
    for issuer in ("https://evil.example", "https://mem.example/", None):
        token = _sign(key, _claims(settings, iss=issuer))
        await _refused(keystore, settings, token, "wrong issuer")
    # A token of this server, presented to a server with another public URL.
    token = issue_access_token(keystore, settings, user_id=1, client_id="c", scope="", now=NOW)
    moved = settings.with_overrides(public_url="https://moved.example")
    await _refused(keystore, moved, token, "wrong issuer")


async def test_expiry_with_leeway(keystore, settings):
    token = issue_access_token(
        keystore, settings, user_id=1, client_id="c", scope="", ttl_s=60, now=NOW
    )
    assert await verify_access_token(keystore, settings, token, now=NOW + 60 + LEEWAY_S - 1)
    await _refused(keystore, settings, token, "token expired", now=NOW + 60 + LEEWAY_S)
    await _refused(keystore, settings, token, "token expired", now=NOW + 10**6)


async def test_missing_or_bad_claims_are_refused(keystore, settings):
    key = keystore.signing_key()
    cases = {
        "missing subject": [
            {"sub": None},
            {"sub": "abc"},
            {"sub": 7},
            {"sub": "0"},
            {"sub": "-1"},
            {"sub": "1" * 30},
        ],
        "missing expiry": [{"exp": None}, {"exp": "soon"}, {"exp": True}, {"exp": float("nan")}],
        "missing issue time": [{"iat": None}],
        "token issued in the future": [{"iat": NOW + LEEWAY_S + 1}],
        "token not yet valid": [{"nbf": NOW + LEEWAY_S + 1}, {"nbf": "x"}],
        "missing client_id": [{"client_id": None}, {"client_id": ""}],
        "missing jti": [{"jti": None}, {"jti": 5}],
        "malformed scope": [{"scope": ["memory"]}],
    }
    for reason, changes in cases.items():
        for change in changes:
            claims = _claims(settings)
            claims.update(change)
            claims = {k: v for k, v in claims.items() if v is not None}
            await _refused(keystore, settings, _sign(key, claims), reason)
    no_scope = _claims(settings)
    del no_scope["scope"]
    principal = await verify_access_token(keystore, settings, _sign(key, no_scope), now=NOW)
    assert principal.scopes == frozenset()


async def test_wrong_token_type_is_refused(keystore, settings):
    key = keystore.signing_key()
    for typ in ("JWT", None, "at+jwt+x"):
        token = _sign(key, _claims(settings), typ=typ)
        await _refused(keystore, settings, token, "not an access token")
    accepted = _sign(key, _claims(settings), typ="application/at+JWT")
    assert await verify_access_token(keystore, settings, accepted, now=NOW)


async def test_critical_or_unencoded_headers_are_refused(keystore, settings):
    key = keystore.signing_key()
    header = {"alg": "RS256", "kid": key.kid, "typ": "at+jwt", "b64": False, "crit": ["b64"]}
    token = jwt.encode(header, _claims(settings), key, algorithms=["RS256"])
    await _refused(keystore, settings, token)


@pytest.mark.parametrize(
    "token",
    [
        "",
        "abc",
        "a.b",
        "a.b.c",
        "a.b.c.d",
        "....",
        "é.é.é",
        "e30.e30.e30",
        "x" * 5000,
        "eyJhbGciOiJSUzI1NiJ9.e30",
        "eyJhbGciOiJSUzI1NiJ9.e30.e30",
    ],
)
async def test_garbage_is_refused(keystore, settings, token):
    await _refused(keystore, settings, token)


async def test_garbage_payload_is_refused(keystore, settings):
    key = keystore.signing_key()
    header = {"alg": "RS256", "kid": key.kid, "typ": "at+jwt"}
    for payload in (b"not json", b"[1, 2]", b'"text"'):
        token = jws.serialize_compact(header, payload, key, algorithms=["RS256"])
        await _refused(keystore, settings, token, "malformed claims")


async def test_bearer_validator_end_to_end(keystore, settings, alice):
    validator = BearerValidator(keystore, settings)
    token = issue_access_token(keystore, settings, user_id=alice, client_id="c", scope="memory")
    assert (await validator.validate(f"Bearer {token}")).user_id == alice
    assert (await validator.validate(f"bearer   {token} ")).user_id == alice
    with pytest.raises(BearerError) as caught:
        await validator.validate(f"Bearer {token}x")
    assert caught.value.error == "invalid_token"
    assert 'error="invalid_token"' in validator.challenge(caught.value)


async def test_verify_speed(keystore, settings, capsys):
    """Micro-benchmark, printed not asserted: verification runs on every request."""
    token = issue_access_token(keystore, settings, user_id=1, client_id="c", scope="memory")
    for _ in range(100):
        await verify_access_token(keystore, settings, token)
    samples = []
    for _ in range(2000):
        t0 = time.perf_counter()
        await verify_access_token(keystore, settings, token)
        samples.append(time.perf_counter() - t0)
    samples.sort()
    t0 = time.perf_counter()
    for _ in range(200):
        issue_access_token(keystore, settings, user_id=1, client_id="c", scope="memory")
    issue = (time.perf_counter() - t0) / 200
    with capsys.disabled():
        print(
            f"\nverify_access_token: median {1e6 * statistics.median(samples):.0f} us,"
            f" p99 {1e6 * samples[int(len(samples) * 0.99)]:.0f} us;"
            f" issue_access_token: mean {1e6 * issue:.0f} us"
        )
