"""RFC 8252 §7.3: a registered loopback redirect URI matches any port; nothing else loosens."""

from __future__ import annotations

import pytest

from auth.redirects import is_registered

REGISTERED = [
    "http://localhost/callback",
    "http://127.0.0.1:8080/callback",
    "http://[::1]/cb?x=1",
    "https://claude.ai/api/mcp/auth_callback",
]


@pytest.mark.parametrize(
    ("requested", "ok"),
    [
        ("http://localhost/callback", True),
        ("http://localhost:33418/callback", True),
        ("http://localhost:1/callback", True),
        ("http://127.0.0.1:8080/callback", True),
        ("http://127.0.0.1:54321/callback", True),
        ("http://127.0.0.1/callback", True),
        ("http://[::1]:9000/cb?x=1", True),
        ("http://[::1]/cb?x=1", True),
        # Only the port may differ: path, query, host name and scheme stay exact.
        ("http://localhost:33418/callback/", False),
        ("http://localhost:33418/Callback", False),
        ("http://localhost:33418/callback?x=1", False),
        ("http://[::1]:9000/cb?x=2", False),
        ("http://[::1]:9000/cb", False),
        ("http://127.0.0.1:33418/cb?x=1", False),  # another loopback name than registered
        ("http://LOCALHOST:33418/callback", False),
        ("https://localhost:33418/callback", False),
        ("http://localhost:33418@evil.example/callback", False),
        ("http://localhost:33418/callback#x", False),
        ("http://localhost:abc/callback", False),
        ("http://localhost.evil.example:33418/callback", False),
        # White space and control characters never match, wherever they stand: Python's
        # URL parser drops tabs and newlines, which would make these look registered.
        ("http://localhost:33418/callback\n", False),
        ("http://127.0.0.1:8080/callback\n", False),
        ("http://127.0.0.1:54321/callback\r\n", False),
        ("http://127.0.0.1:54\t321/callback", False),
        ("http://127.0.0.1:54321/call\nback", False),
        ("\thttp://127.0.0.1:54321/callback", False),
        (" http://127.0.0.1:8080/callback", False),
        ("http://[::1]:9000/cb?x=1\n", False),
        ("http://[::1]:9000/cb?x=1\x00", False),
        ("https://claude.ai/api/mcp/auth_callback\n", False),
        ("https://claude.ai/api/mcp/auth_callback\u2028", False),
        # Non-loopback URIs match exactly, ports included.
        ("https://claude.ai/api/mcp/auth_callback", True),
        ("https://claude.ai:443/api/mcp/auth_callback", False),
        ("https://claude.ai:8443/api/mcp/auth_callback", False),
    ],
)
def test_loopback_ports(requested: str, ok: bool) -> None:
    assert is_registered(requested, REGISTERED) is ok


def test_a_non_loopback_http_uri_never_matches_on_port() -> None:
    assert not is_registered("http://10.0.0.1:81/cb", ["http://10.0.0.1/cb"])


def test_a_registered_uri_with_a_newline_never_matches_even_itself() -> None:
    # Registration refuses such a URI; a row written before that rule still matches nothing.
    assert not is_registered("https://app.example/cb\n", ["https://app.example/cb\n"])
    assert not is_registered("http://127.0.0.1/cb\n", ["http://127.0.0.1/cb\n"])
