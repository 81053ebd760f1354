"""The proxy ``scripts.conformance`` puts between the suite and ``/mcp``.

The suite cannot send a token; the proxy adds one and must pass the rest of a
request on unchanged (Host and Origin too: the suite's DNS-rebinding scenario
is judged by our Origin check), answers included. The upstream here is a
small local HTTP server that reports what it received.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from scripts.conformance import authenticating_proxy


class _Echo(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        reply = json.dumps(
            {"path": self.path, "headers": dict(self.headers.items()), "body": body.decode()}
        ).encode()
        self.send_response(207)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Upstream", "yes")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_proxy_adds_the_token_and_passes_the_rest_unchanged(upstream: str) -> None:
    with authenticating_proxy(upstream, "tok-123") as proxy:
        reply = httpx.post(
            f"{proxy}/mcp?x=1",
            content=b'{"jsonrpc":"2.0"}',
            headers={
                "Content-Type": "application/json",
                "Host": "evil.example",
                "Origin": "https://evil.example",
                "Authorization": "Bearer the-suites-own",
            },
        )
    assert reply.status_code == 207 and reply.headers["X-Upstream"] == "yes"
    seen = reply.json()
    assert seen["path"] == "/mcp?x=1" and seen["body"] == '{"jsonrpc":"2.0"}'
    headers = {k.lower(): v for k, v in seen["headers"].items()}
    assert headers["authorization"] == "Bearer tok-123"  # ours replaces any other
    assert headers["host"] == "evil.example" and headers["origin"] == "https://evil.example"


def test_whitespace_around_a_header_value_is_not_passed_on(upstream: str) -> None:
    # httpx refuses to send it; the suite's header-validation scenario sends some.
    with authenticating_proxy(upstream, "tok") as proxy:
        conn = http.client.HTTPConnection(proxy.removeprefix("http://"), timeout=10)
        conn.putrequest("POST", "/mcp")
        conn.putheader("Mcp-Name", "  remember  ")
        conn.putheader("Content-Length", "2")
        conn.endheaders(b"{}")
        reply = conn.getresponse()
        seen = json.loads(reply.read())
        conn.close()
    assert reply.status == 207
    headers = {k.lower(): v for k, v in seen["headers"].items()}
    assert headers["mcp-name"] == "remember"
