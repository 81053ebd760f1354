"""auth.metadata_fetch: the SSRF rules, the limits and the cache headers, against a real HTTPS server."""

from __future__ import annotations

import ipaddress
import ssl
from email.utils import formatdate
from pathlib import Path

import certifi
import pytest
import trustme

from auth.metadata_fetch import (
    DEFAULT_TTL_S,
    MAX_TTL_S,
    FetchError,
    MetadataFetcher,
    address_problem,
    cache_lifetime,
    url_problem,
)
from bootstrap.web import metadata_fetcher
from config.settings import Settings
from tests.auth.cimd_server import (
    CLAUDE_AI_PATH,
    DocumentServer,
    Route,
    ca_file,
    claude_ai_document,
    document_server,
    fetcher,
    test_ca,
    test_resolver,
    trusting,
)

__all__ = ["ca_file", "document_server", "fetcher", "test_ca"]


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("93.184.216.34", None),
        ("2606:4700::6810:84e5", None),
        ("127.0.0.1", "a loopback address"),
        ("127.8.9.10", "a loopback address"),
        ("::1", "a loopback address"),
        ("10.0.0.7", "a private address"),
        ("172.16.5.4", "a private address"),
        ("192.168.1.1", "a private address"),
        ("fd00::1", "a private address"),
        ("169.254.169.254", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("100.64.0.1", "a shared (CGNAT) address"),
        ("224.0.0.1", "a multicast address"),
        ("ff02::1", "a multicast address"),
        ("0.0.0.0", "an unspecified address"),
        ("::", "an unspecified address"),
        ("240.0.0.1", "a reserved address"),
        ("192.0.2.1", "a private address"),  # TEST-NET-1: documentation, not routable
        ("::ffff:10.0.0.1", "a private address"),  # IPv4-mapped
        ("::ffff:127.0.0.1", "a loopback address"),
        ("64:ff9b::a00:1", "a private address"),  # NAT64 of 10.0.0.1
        ("2002:a00:1::", "a private address"),  # 6to4 of 10.0.0.1
    ],
)
def test_address_rules(address: str, problem: str | None) -> None:
    assert address_problem(ipaddress.ip_address(address), allow_loopback=False) == problem


def test_loopback_only_when_allowed() -> None:
    assert address_problem(ipaddress.ip_address("127.0.0.1"), allow_loopback=True) is None
    assert address_problem(ipaddress.ip_address("::ffff:127.0.0.1"), allow_loopback=True) is None
    # Allowing loopback allows nothing else.
    assert address_problem(ipaddress.ip_address("10.0.0.1"), allow_loopback=True) is not None


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://claude.ai/oauth/mcp-oauth-client-metadata", True),
        ("https://claude.ai:8443/x", True),
        ("http://claude.ai/x", False),
        ("ftp://claude.ai/x", False),
        ("https:///x", False),
        ("https://user:pw@claude.ai/x", False),
        ("https://claude.ai/x#frag", False),
        ("https://claude.ai:99999/x", False),
        ("https://claude.ai/" + "a" * 2100, False),
    ],
)
def test_url_rules(url: str, ok: bool) -> None:
    assert (url_problem(url) is None) is ok


NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("headers", "ttl"),
    [
        ({}, DEFAULT_TTL_S),
        ({"cache-control": "max-age=60"}, 60.0),
        ({"cache-control": "public, max-age=3600"}, 3600.0),
        ({"cache-control": 'max-age="120"'}, 120.0),
        ({"cache-control": "max-age=0"}, 0.0),
        ({"cache-control": "no-store"}, 0.0),
        ({"cache-control": "no-cache, max-age=600"}, 0.0),
        ({"cache-control": "max-age=abc"}, 0.0),
        ({"cache-control": "max-age=999999999"}, MAX_TTL_S),
        ({"expires": formatdate(NOW + 90, usegmt=True)}, 90.0),
        (
            {
                "expires": formatdate(NOW + 500, usegmt=True),
                "date": formatdate(NOW + 400, usegmt=True),
            },
            100.0,
        ),
        ({"expires": formatdate(NOW - 10, usegmt=True)}, 0.0),
        ({"expires": "0"}, 0.0),
        # max-age wins over Expires (RFC 9111 §5.3).
        ({"cache-control": "max-age=30", "expires": formatdate(NOW + 900, usegmt=True)}, 30.0),
    ],
)
def test_cache_lifetime(headers: dict[str, str], ttl: float) -> None:
    assert cache_lifetime(headers, NOW) == pytest.approx(ttl, abs=1)


# -- fetching from the local HTTPS server ------------------------------------------------


async def test_fetches_a_document_by_name_through_the_checked_address(
    fetcher: MetadataFetcher, document_server: DocumentServer
) -> None:
    # claude.ai reaches 127.0.0.1 only through the resolver hook: the connection went to the
    # address that was checked, while TLS verified the certificate for the name.
    url = document_server.url("claude.ai", CLAUDE_AI_PATH)
    document_server.serve_json(
        CLAUDE_AI_PATH, claude_ai_document(url), {"Cache-Control": "max-age=120"}
    )
    fetched = await fetcher.fetch_json(url)
    assert fetched.body["client_name"] == "Claude"
    assert fetched.ttl_s == 120.0
    assert document_server.hits[CLAUDE_AI_PATH] == 1


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("internal.example", "a private address"),
        ("metadata.example", "a link-local address"),
        ("cgnat.example", "a shared (CGNAT) address"),
        ("mapped.example", "a private address"),
        # One internal address among public ones refuses the name (rebinding across answers).
        ("mixed.example", "a private address"),
        ("10.0.0.1", "a private address"),
        ("[::ffff:169.254.169.254]", "a link-local address"),
    ],
)
async def test_internal_addresses_are_never_fetched(
    fetcher: MetadataFetcher, document_server: DocumentServer, host: str, reason: str
) -> None:
    with pytest.raises(FetchError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        await fetcher.fetch_json(f"https://{host}:{document_server.port}{CLAUDE_AI_PATH}")
    assert document_server.hits[CLAUDE_AI_PATH] == 0


async def test_loopback_is_refused_unless_allowed(
    test_ca: trustme.CA, document_server: DocumentServer
) -> None:
    url = document_server.url("claude.ai", CLAUDE_AI_PATH)
    document_server.serve_json(CLAUDE_AI_PATH, claude_ai_document(url))
    strict = MetadataFetcher(trusting(test_ca), resolver=test_resolver)
    try:
        with pytest.raises(FetchError, match="loopback"):
            await strict.fetch_json(url)
        with pytest.raises(FetchError, match="loopback"):
            await strict.fetch_json(document_server.url("127.0.0.1", CLAUDE_AI_PATH))
    finally:
        await strict.aclose()
    assert document_server.hits[CLAUDE_AI_PATH] == 0


async def test_http_is_never_fetched(
    fetcher: MetadataFetcher, document_server: DocumentServer
) -> None:
    with pytest.raises(FetchError, match="only https"):
        await fetcher.fetch_json(f"http://claude.ai:{document_server.port}{CLAUDE_AI_PATH}")


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_redirects_are_refused_not_followed(
    fetcher: MetadataFetcher, document_server: DocumentServer, status: int
) -> None:
    target = document_server.url("claude.ai", "/elsewhere")
    document_server.routes[CLAUDE_AI_PATH] = Route(status, b"", {"Location": target})
    document_server.serve_json("/elsewhere", {"client_id": target})
    with pytest.raises(FetchError, match="redirect"):
        await fetcher.fetch_json(document_server.url("claude.ai", CLAUDE_AI_PATH))
    assert document_server.hits["/elsewhere"] == 0


@pytest.mark.parametrize("declared", [True, False])
async def test_oversized_documents_are_abandoned(
    fetcher: MetadataFetcher, document_server: DocumentServer, declared: bool
) -> None:
    body = b'{"pad": "' + b"x" * (200 * 1024) + b'"}'
    document_server.routes[CLAUDE_AI_PATH] = Route(200, body, declare_length=declared)
    with pytest.raises(FetchError, match="larger than 65536 bytes"):
        await fetcher.fetch_json(document_server.url("claude.ai", CLAUDE_AI_PATH))


async def test_a_document_just_under_the_cap_is_read(
    fetcher: MetadataFetcher, document_server: DocumentServer
) -> None:
    body = b'{"pad": "' + b"x" * (64 * 1024 - 20) + b'"}'
    document_server.routes[CLAUDE_AI_PATH] = Route(200, body, declare_length=False)
    fetched = await fetcher.fetch_json(document_server.url("claude.ai", CLAUDE_AI_PATH))
    assert len(fetched.body["pad"]) == 64 * 1024 - 20


async def test_a_server_that_never_answers_times_out(
    test_ca: trustme.CA, document_server: DocumentServer
) -> None:
    document_server.routes[CLAUDE_AI_PATH] = Route(hang=True)
    quick = MetadataFetcher(
        trusting(test_ca), allow_loopback=True, resolver=test_resolver, timeout_s=0.3
    )
    try:
        with pytest.raises(FetchError, match="in time"):
            await quick.fetch_json(document_server.url("claude.ai", CLAUDE_AI_PATH))
    finally:
        await quick.aclose()


@pytest.mark.parametrize(
    ("route", "reason"),
    [
        (Route(200, b"<html>not json</html>"), "not valid JSON"),
        (Route(404, b"{}"), "answered 404"),
        (Route(500, b"{}"), "answered 500"),
        (Route(200, b"{}", {"Content-Encoding": "gzip"}), "compressed"),
    ],
)
async def test_bad_answers_are_refused(
    fetcher: MetadataFetcher, document_server: DocumentServer, route: Route, reason: str
) -> None:
    document_server.routes[CLAUDE_AI_PATH] = route
    with pytest.raises(FetchError, match=reason):
        await fetcher.fetch_json(document_server.url("claude.ai", CLAUDE_AI_PATH))


async def test_an_untrusted_certificate_is_refused(document_server: DocumentServer) -> None:
    url = document_server.url("claude.ai", CLAUDE_AI_PATH)
    document_server.serve_json(CLAUDE_AI_PATH, claude_ai_document(url))
    public_only = MetadataFetcher(
        ssl.create_default_context(cafile=certifi.where()),
        allow_loopback=True,
        resolver=test_resolver,
    )
    try:
        with pytest.raises(FetchError, match="certificate"):
            await public_only.fetch_json(url)
    finally:
        await public_only.aclose()


async def test_a_certificate_for_another_name_is_refused(
    fetcher: MetadataFetcher, document_server: DocumentServer
) -> None:
    # internal names aside, every test name but this one is in the certificate
    from tests.auth import cimd_server

    cimd_server.NAMES["other.example"] = ["127.0.0.1"]
    try:
        with pytest.raises(FetchError, match="certificate"):
            await fetcher.fetch_json(document_server.url("other.example", CLAUDE_AI_PATH))
    finally:
        del cimd_server.NAMES["other.example"]


async def test_bootstrap_trusts_the_ssl_cert_file(
    ca_file: Path, document_server: DocumentServer
) -> None:
    """SSL_CERT_FILE (Settings.ssl_cert_file) is the CA bundle of the fetcher bootstrap builds."""
    url = document_server.url("127.0.0.1", CLAUDE_AI_PATH)
    document_server.serve_json(CLAUDE_AI_PATH, claude_ai_document(url))
    env = {"SSL_CERT_FILE": str(ca_file), "CIMD_ALLOW_LOOPBACK": "true"}
    built = metadata_fetcher(Settings.from_env(env))
    try:
        assert (await built.fetch_json(url)).body["client_id"] == url
    finally:
        await built.aclose()
    # Without it, certifi's public roots: the test CA is not among them.
    default = metadata_fetcher(Settings.from_env({"CIMD_ALLOW_LOOPBACK": "true"}))
    try:
        with pytest.raises(FetchError, match="certificate"):
            await default.fetch_json(url)
    finally:
        await default.aclose()
    # And loopback stays refused unless CIMD_ALLOW_LOOPBACK says otherwise.
    assert Settings.from_env({}).cimd_allow_loopback is False
    strict = metadata_fetcher(Settings.from_env({"SSL_CERT_FILE": str(ca_file)}))
    try:
        with pytest.raises(FetchError, match="loopback"):
            await strict.fetch_json(url)
    finally:
        await strict.aclose()


def test_a_missing_ssl_cert_file_is_a_settings_error(tmp_path: Path) -> None:
    from config.settings import SettingsError

    with pytest.raises(SettingsError, match="SSL_CERT_FILE"):
        Settings.from_env({"SSL_CERT_FILE": str(tmp_path / "missing.pem")})


async def test_an_unreadable_ca_bundle_fails_the_fetch_not_the_server(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate")
    broken = MetadataFetcher(lambda: ssl.create_default_context(cafile=str(bad)))
    try:
        with pytest.raises(FetchError, match="CA bundle"):
            await broken.fetch_json("https://claude.ai/oauth/mcp-oauth-client-metadata")
    finally:
        await broken.aclose()
