"""Helpers shared by the start-up, TLS, proxy and shutdown tests.

- :func:`failed_sign_in`: one wrong-password OAuth sign-in, optionally with X-Forwarded-For.
- :func:`call_tool`: one MCP ``tools/call`` over plain HTTP, as curl would send it.
- :class:`GatedProvider`: the OpenAI-compatible test server of
  ``tests/unit/test_openai_embedder.py``, able to hold a batch call until the
  test lets it go, so a test knows a write is in flight on a worker.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from tests.auth.oauth_flow import CLAUDE_CALLBACK, parse_form, pkce_pair
from tests.providers.test_openai_embedder import FakeProvider, Reply, Request, serve_provider

#: The session database's embedding width.
DIMENSIONS = 384

#: Variables the test process may carry that would change what a server it starts does.
SERVER_VARIABLES = (
    "DATABASE_URL",
    "REDIS_URL",
    "OWNSONA_PUBLIC_URL",
    "OWNSONA_HOST",
    "OWNSONA_LOGIN_PASSWORD",
    "OWNSONA_LOGIN_USERNAME",
    "EMBEDDING_PROVIDER",
    "EMBEDDING_BASE_URL",
    "EMBEDDING_MODEL",
    "EMBEDDING_DIMENSIONS",
    "FORWARDED_ALLOW_IPS",
    "SHUTDOWN_TIMEOUT",
    "PORT",
)


def base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in SERVER_VARIABLES}


def call_tool(
    url: str, token: str, name: str, arguments: dict[str, Any], *, timeout: float = 90
) -> dict[str, Any]:
    """The tool's structured result; fails the test on a JSON-RPC or tool error."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    answer = httpx.post(
        f"{url}/mcp",
        json=body,
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
        },
        timeout=timeout,
    )
    assert answer.status_code == 200, answer.text
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in answer.text.splitlines() if line.startswith("data:")]
        message = json.loads(data[-1])
    else:
        message = answer.json()
    assert "error" not in message, message
    result = message["result"]
    assert not result.get("isError"), result
    return dict(result["structuredContent"])


class GatedProvider(FakeProvider):
    """Holds every embeddings call of at least ``gate_at`` inputs until :meth:`release`."""

    def __init__(self, gate_at: int) -> None:
        super().__init__()
        self.dims = DIMENSIONS
        self.gate_at = gate_at
        self.held = threading.Event()  # a gated call has arrived
        self._open = threading.Event()
        self.gated_calls = 0

    def next_reply(self, request: Request) -> Reply:
        reply = super().next_reply(request)
        if len(request.body.get("input") or []) >= self.gate_at:
            with self._lock:
                self.gated_calls += 1
            self.held.set()
            self._open.wait(120)
        return reply

    def release(self) -> None:
        self._open.set()


@contextmanager
def provider_server(provider: FakeProvider) -> Iterator[str]:
    """Serve ``provider``; yields its ``EMBEDDING_BASE_URL`` (a held call is let go at the end)."""
    try:
        with serve_provider(provider) as base_url:
            yield base_url
    finally:
        if isinstance(provider, GatedProvider):
            provider.release()


def provider_env(base_url: str) -> dict[str, str]:
    """Settings that embed through the test provider at the session database's width."""
    return {
        "EMBEDDING_PROVIDER": "openai",
        "EMBEDDING_BASE_URL": base_url,
        "EMBEDDING_MODEL": "text-embedding-test",
        "EMBEDDING_DIMENSIONS": str(DIMENSIONS),
    }


def failed_sign_in(url: str, forwarded_for: str) -> None:
    """Register a client, open its login page, and sign in with a wrong password."""
    with httpx.Client(base_url=url, timeout=30) as http:
        client = http.post(
            "/oauth/register", json={"redirect_uris": [CLAUDE_CALLBACK], "client_name": "Claude"}
        )
        assert client.status_code == 201, client.text
        _, challenge = pkce_pair()
        page = http.get(
            "/oauth/authorize",
            params={
                "response_type": "code",
                "client_id": client.json()["client_id"],
                "redirect_uri": CLAUDE_CALLBACK,
                "state": "s1",
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "scope": "memory:read",
                "resource": f"{url}/mcp",
            },
        )
        assert page.status_code == 200 and 'name="password"' in page.text, page.text[:500]
        form = parse_form(page.text)
        fields = dict(form["fields"]) | {"username": "mallory", "password": "not the password"}
        answer = http.post(form["action"], data=fields, headers={"X-Forwarded-For": forwarded_for})
        assert answer.status_code == 400 and "Incorrect username or password" in answer.text
