"""A local HTTPS server for client ID metadata documents, with a test CA (trustme).

The published clients' documents are served in their real shapes (claude.ai,
Claude Code, ChatGPT) under their real paths. Their host names reach this
server through the fetcher's resolver hook (:data:`NAMES`), with loopback
allowed, as ``CIMD_ALLOW_LOOPBACK=true`` allows it; names that resolve to
internal addresses are there too, for the SSRF tests. Nothing leaves the
machine.

Shared by ``tests/auth`` and ``tests/api/test_oauth_cimd.py`` (which import
the fixtures), and by the SDK end-to-end test.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import trustme

from auth.metadata_fetch import MetadataFetcher

CLAUDE_AI_PATH = "/oauth/mcp-oauth-client-metadata"
CLAUDE_CODE_PATH = "/oauth/claude-code-client-metadata"
CHATGPT_PATH = "/oauth/client.json"

#: What the test resolver answers: public names on this machine, internal names elsewhere.
NAMES: dict[str, list[str]] = {
    "claude.ai": ["127.0.0.1"],
    "claude.com": ["127.0.0.1"],
    "chatgpt.com": ["127.0.0.1"],
    "evil.example": ["127.0.0.1"],
    "localhost": ["127.0.0.1"],
    "internal.example": ["10.0.0.7"],
    "metadata.example": ["169.254.169.254"],
    "cgnat.example": ["100.64.1.2"],
    "mapped.example": ["::ffff:10.0.0.1"],
    "mixed.example": ["127.0.0.1", "192.168.1.20"],
}
#: Names in the server's certificate.
CERT_NAMES = ("claude.ai", "claude.com", "chatgpt.com", "evil.example", "localhost", "127.0.0.1")


async def test_resolver(host: str, port: int) -> list[str]:
    """The fetcher's resolver in tests: :data:`NAMES`, and nothing from the system."""
    try:
        return NAMES[host]
    except KeyError:
        raise OSError(f"{host} is not a test name") from None


test_resolver.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


@dataclass
class Route:
    """What the server answers on one path."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    #: Send Content-Length (False: the body runs until the connection closes).
    declare_length: bool = True
    #: Never answer (until the server stops): for the timeout.
    hang: bool = False


class DocumentServer:
    """HTTPS on 127.0.0.1 with a certificate for :data:`CERT_NAMES`; routes set by the test."""

    def __init__(self, ca: trustme.CA) -> None:
        self.routes: dict[str, Route] = {}
        self.hits: Counter[str] = Counter()
        self._stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_GET(self) -> None:
                server.hits[self.path] += 1
                route = server.routes.get(self.path)
                if route is None:
                    self.send_error(404)
                    return
                if route.hang:
                    server._stop.wait(30)
                    return
                self.send_response(route.status)
                for name, value in route.headers.items():
                    self.send_header(name, value)
                if route.declare_length:
                    self.send_header("Content-Length", str(len(route.body)))
                self.end_headers()
                # The fetcher may stop reading: what the size cap does.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError, ssl.SSLError):
                    self.wfile.write(route.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(*CERT_NAMES).configure_cert(context)
        self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
        self.port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def start(self) -> DocumentServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def url(self, host: str, path: str) -> str:
        return f"https://{host}:{self.port}{path}"

    def serve_json(
        self, path: str, document: Any, headers: dict[str, str] | None = None, status: int = 200
    ) -> None:
        self.routes[path] = Route(
            status,
            json.dumps(document).encode(),
            {"Content-Type": "application/json", **(headers or {})},
        )


# -- the published documents' shapes ---------------------------------------------------


def claude_ai_document(url: str) -> dict[str, Any]:
    return {
        "client_id": url,
        "client_name": "Claude",
        "client_uri": "https://claude.ai",
        "logo_uri": "https://claude.ai/favicon.ico",
        "redirect_uris": [
            "https://claude.ai/api/mcp/auth_callback",
            "https://claude.com/api/mcp/auth_callback",
        ],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }


def claude_code_document(url: str) -> dict[str, Any]:
    return {
        "client_id": url,
        "client_name": "Claude Code",
        "client_uri": "https://claude.ai",
        "redirect_uris": ["http://localhost/callback", "http://127.0.0.1/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "native",
    }


def chatgpt_document(
    url: str, jwks: dict[str, Any] | None = None, jwks_uri: str | None = None
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "client_id": url,
        "client_name": "ChatGPT",
        "client_uri": "https://chatgpt.com",
        "redirect_uris": ["https://chatgpt.com/connector_platform_oauth_redirect"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "private_key_jwt",
        "token_endpoint_auth_signing_alg": "RS256",
    }
    if jwks is not None:
        document["jwks"] = jwks
    if jwks_uri is not None:
        document["jwks_uri"] = jwks_uri
    return document


# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def test_ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="session")
def ca_file(test_ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ca") / "ca.pem"
    test_ca.cert_pem.write_to_path(str(path))
    return path


@pytest.fixture
def document_server(test_ca: trustme.CA) -> Iterator[DocumentServer]:
    server = DocumentServer(test_ca).start()
    yield server
    server.stop()


def trusting(ca: trustme.CA) -> ssl.SSLContext:
    """A client context that trusts the test CA (and the system's)."""
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


@pytest.fixture
async def fetcher(test_ca: trustme.CA) -> AsyncIterator[MetadataFetcher]:
    """The real fetcher, trusting the test CA, loopback allowed, names from :data:`NAMES`."""
    f = MetadataFetcher(trusting(test_ca), allow_loopback=True, resolver=test_resolver)
    yield f
    await f.aclose()
