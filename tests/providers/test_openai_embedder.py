"""The OpenAI-compatible embedder against a real local HTTP server (no patching)."""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import numpy as np
import pytest

from bootstrap.providers import make_embedder
from config.settings import Settings, SettingsError
from memory.errors import EMBEDDING_ERROR, MemoryServiceError
from memory.providers.embedders import Embedder, OpenAIEmbedder
from tests.providers.local_http import serve_local

API_KEY = "sk-test-secret-key"
DIMS = 8


def raw_vector(text: str, dims: int = DIMS) -> list[float]:
    """The provider's deterministic, deliberately unnormalised vector for ``text``."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    return (np.random.default_rng(seed).normal(size=dims) * 3.0).tolist()


def unit(text: str, dims: int = DIMS) -> np.ndarray:
    v = np.asarray(raw_vector(text, dims), dtype=np.float64)
    return v / np.linalg.norm(v)


@dataclass
class Reply:
    status: int = 200
    body: bytes | None = None  # None: a correct embeddings response
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    reverse: bool = False  # list "data" in reverse order (indexes still right)


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class FakeProvider:
    """Speaks ``POST /v1/embeddings``; replies follow ``script``, then succeed."""

    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.requests: list[Request] = []
        self.dims = DIMS
        self._lock = threading.Lock()

    def next_reply(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            return self.script.pop(0) if self.script else Reply()

    def success_body(self, request: Request, reverse: bool) -> bytes:
        data = [
            {"object": "embedding", "index": i, "embedding": raw_vector(text, self.dims)}
            for i, text in enumerate(request.body["input"])
        ]
        if reverse:
            data.reverse()
        payload = {
            "object": "list",
            "data": data,
            "model": request.body["model"],
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }
        return json.dumps(payload).encode()


def _handler(provider: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"null")
            request = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            reply = provider.next_reply(request)
            if reply.delay_s:
                time.sleep(reply.delay_s)
            content = reply.body
            if content is None:
                content = provider.success_body(request, reply.reverse)
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(content)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(content)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout tests)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def serve_provider(provider: FakeProvider) -> AbstractContextManager[str]:
    """Serve ``provider`` on a free loopback port; yields its ``EMBEDDING_BASE_URL``."""
    return serve_local(_handler(provider))


@pytest.fixture
def provider() -> Iterator[tuple[FakeProvider, str]]:
    fake = FakeProvider()
    with serve_provider(fake) as base_url:
        yield fake, base_url


MakeEmbedder = Callable[..., OpenAIEmbedder]


@pytest.fixture
async def make(provider: tuple[FakeProvider, str]) -> AsyncIterator[MakeEmbedder]:
    """Builds embedders on the fake provider (fast back-off) and closes them all."""
    _, base_url = provider
    made: list[OpenAIEmbedder] = []

    def build(**options: Any) -> OpenAIEmbedder:
        config: dict[str, Any] = {
            "base_url": base_url,
            "model": "text-embedding-test",
            "api_key": API_KEY,
            "timeout_s": 5.0,
            "backoff_base_s": 0.01,
        }
        config.update(options)
        if "client" not in config:
            config.update(client=httpx.AsyncClient(), owns_client=True)
        embedder = OpenAIEmbedder(**config)
        made.append(embedder)
        return embedder

    yield build
    for embedder in made:
        await embedder.aclose()


def _error_detail(caught: pytest.ExceptionInfo[MemoryServiceError]) -> dict[str, Any]:
    assert caught.value.code == EMBEDDING_ERROR
    assert caught.value.detail is not None
    assert caught.value.detail["provider"] == "openai"
    return caught.value.detail


async def test_success_sends_the_wire_format(
    provider: tuple[FakeProvider, str], make: MakeEmbedder
) -> None:
    fake, _ = provider
    embedder = make()
    texts = ["My sister is a nurse.", "Prefers tea."]
    vectors = await embedder.embed(texts)

    assert isinstance(embedder, Embedder)
    assert vectors.dtype == np.float32
    assert vectors.shape == (2, DIMS)
    np.testing.assert_allclose(vectors, np.stack([unit(t) for t in texts]), atol=1e-6)
    assert embedder.dimensions == DIMS  # learned from the response

    (request,) = fake.requests
    assert request.path == "/v1/embeddings"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.headers["content-type"] == "application/json"
    assert request.body == {
        "model": "text-embedding-test",
        "input": texts,
        "encoding_format": "float",
    }


async def test_configured_dimensions_are_sent(
    provider: tuple[FakeProvider, str], make: MakeEmbedder
) -> None:
    fake, _ = provider
    embedder = make(dimensions=DIMS, api_key=None)
    assert embedder.dimensions == DIMS
    assert await embedder.ensure_ready() == DIMS
    assert fake.requests == []  # no probe when EMBEDDING_DIMENSIONS is set

    await embedder.embed_one("hello")
    (request,) = fake.requests
    assert request.body["dimensions"] == DIMS
    assert "authorization" not in request.headers


async def test_ensure_ready_probes_once(
    provider: tuple[FakeProvider, str], make: MakeEmbedder
) -> None:
    fake, _ = provider
    fake.dims = 12
    embedder = make()
    with pytest.raises(RuntimeError):
        _ = embedder.dimensions
    assert await embedder.ensure_ready() == 12
    assert await embedder.ensure_ready() == 12
    assert embedder.dimensions == 12
    assert len(fake.requests) == 1
    assert "dimensions" not in fake.requests[0].body


async def test_empty_input_makes_no_request(
    provider: tuple[FakeProvider, str], make: MakeEmbedder
) -> None:
    fake, _ = provider
    embedder = make(dimensions=DIMS)
    vectors = await embedder.embed([])
    assert vectors.shape == (0, DIMS)
    assert fake.requests == []


async def test_order_is_restored_by_index(
    provider: tuple[FakeProvider, str], make: MakeEmbedder
) -> None:
    fake, _ = provider
    fake.script = [Reply(reverse=True)]
    texts = [f"memory number {n}" for n in range(5)]
    vectors = await make().embed(texts)
    np.testing.assert_allclose(vectors, np.stack([unit(t) for t in texts]), atol=1e-6)


async def test_429_then_success_is_retried(
    provider: tuple[FakeProvider, str], make: MakeEmbedder
) -> None:
    fake, _ = provider
    fake.script = [
        Reply(429, b'{"error": {"message": "Rate limit reached"}}', {"Retry-After": "0.05"}),
    ]
    started = time.perf_counter()
    vector = await make().embed_one("hello")
    assert time.perf_counter() - started >= 0.05  # Retry-After was honoured
    np.testing.assert_allclose(vector, unit("hello"), atol=1e-6)
    assert len(fake.requests) == 2


async def test_persistent_500_is_an_embedding_error(
    provider: tuple[FakeProvider, str], make: MakeEmbedder
) -> None:
    fake, _ = provider
    body = json.dumps({"error": {"message": "The server had an error", "type": "server_error"}})
    fake.script = [Reply(500, body.encode()) for _ in range(5)]
    with pytest.raises(MemoryServiceError) as caught:
        await make().embed(["hello"])
    detail = _error_detail(caught)
    assert detail["status"] == 500
    assert detail["provider_message"] == "The server had an error"
    assert len(fake.requests) == 3  # at most three attempts
    assert "500" in caught.value.message


async def test_client_errors_are_not_retried(
    provider: tuple[FakeProvider, str], make: MakeEmbedder
) -> None:
    fake, _ = provider
    long_message = "x" * 2000
    fake.script = [Reply(400, json.dumps({"error": {"message": long_message}}).encode())]
    with pytest.raises(MemoryServiceError) as caught:
        await make().embed(["hello"])
    detail = _error_detail(caught)
    assert detail["status"] == 400
    assert detail["provider_message"] == "x" * 500
    assert len(fake.requests) == 1


async def test_plain_string_errors_are_reported(
    provider: tuple[FakeProvider, str], make: MakeEmbedder
) -> None:
    fake, _ = provider
    fake.script = [Reply(404, b'{"error": "model \\"nomic\\" not found"}')]  # Ollama's shape
    with pytest.raises(MemoryServiceError) as caught:
        await make().embed(["hello"])
    detail = _error_detail(caught)
    assert detail["status"] == 404
    assert detail["provider_message"] == 'model "nomic" not found'
    assert "EMBEDDING_BASE_URL" in caught.value.message


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"<html>not json</html>", id="not-json"),
        pytest.param(b'{"object": "list"}', id="no-data"),
        pytest.param(b'{"data": [{"index": 0, "embedding": ["a", "b"]}]}', id="not-numbers"),
        pytest.param(b'{"data": [{"index": 0, "embedding": []}]}', id="empty-vector"),
        pytest.param(b'{"data": [{"index": 0, "embedding": [0.0, 0.0]}]}', id="zero-vector"),
        pytest.param(b'{"data": [{"index": 3, "embedding": [1.0, 2.0]}]}', id="bad-index"),
    ],
)
async def test_malformed_responses_are_embedding_errors(
    provider: tuple[FakeProvider, str], make: MakeEmbedder, body: bytes
) -> None:
    fake, _ = provider
    fake.script = [Reply(200, body)]
    with pytest.raises(MemoryServiceError) as caught:
        await make().embed(["hello"])
    assert _error_detail(caught)["status"] == 200
    assert len(fake.requests) == 1


async def test_wrong_count_is_an_embedding_error(
    provider: tuple[FakeProvider, str], make: MakeEmbedder
) -> None:
    fake, _ = provider
    one = {"index": 0, "embedding": raw_vector("a")}
    fake.script = [Reply(200, json.dumps({"data": [one]}).encode())]
    with pytest.raises(MemoryServiceError) as caught:
        await make().embed(["a", "b"])
    _error_detail(caught)
    assert "1 embeddings for 2 inputs" in caught.value.message


async def test_inconsistent_or_unexpected_dimensions(
    provider: tuple[FakeProvider, str], make: MakeEmbedder
) -> None:
    fake, _ = provider
    data = [
        {"index": 0, "embedding": raw_vector("a", 8)},
        {"index": 1, "embedding": raw_vector("b", 9)},
    ]
    fake.script = [Reply(200, json.dumps({"data": data}).encode())]
    embedder = make()
    with pytest.raises(MemoryServiceError):
        await embedder.embed(["a", "b"])

    fake.dims = 16  # the provider now answers 16 wide; we were configured for 8
    with pytest.raises(MemoryServiceError) as caught:
        await make(dimensions=8).embed(["a"])
    assert "EMBEDDING_DIMENSIONS" in caught.value.message


async def test_timeout_is_an_embedding_error(
    provider: tuple[FakeProvider, str], make: MakeEmbedder
) -> None:
    fake, _ = provider
    fake.script = [Reply(delay_s=0.6), Reply(delay_s=0.6)]
    embedder = make(timeout_s=0.2, max_attempts=2)
    started = time.perf_counter()
    with pytest.raises(MemoryServiceError) as caught:
        await embedder.embed(["hello"])
    assert time.perf_counter() - started < 1.5
    detail = _error_detail(caught)
    assert detail["status"] is None
    assert len(fake.requests) == 2
    assert "did not answer" in caught.value.message


async def test_timeout_then_success(provider: tuple[FakeProvider, str], make: MakeEmbedder) -> None:
    fake, _ = provider
    fake.script = [Reply(delay_s=0.6)]
    vector = await make(timeout_s=0.2).embed_one("hello")
    np.testing.assert_allclose(vector, unit("hello"), atol=1e-6)


async def test_unreachable_provider_is_an_embedding_error(make: MakeEmbedder) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    embedder = make(base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(MemoryServiceError) as caught:
        await embedder.embed(["hello"])
    assert _error_detail(caught)["status"] is None
    assert "could not be reached" in caught.value.message


async def test_key_and_texts_never_leak(
    provider: tuple[FakeProvider, str], make: MakeEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    fake, _ = provider
    secret_text = "my bank PIN is 4921"
    fake.script = [Reply(503, b"{}") for _ in range(3)]
    embedder = make()
    with (
        caplog.at_level(logging.DEBUG, logger="memory.providers.openai_embedder"),
        pytest.raises(MemoryServiceError) as caught,
    ):
        await embedder.embed([secret_text])
    assert caplog.records  # the retries were logged ...
    shown = (caplog.text, caught.value.message, json.dumps(caught.value.detail), repr(embedder))
    for text in shown:
        assert API_KEY not in text  # ... without the key
        assert secret_text not in text  # ... or the text


async def test_factory_builds_an_openai_embedder(provider: tuple[FakeProvider, str]) -> None:
    fake, base_url = provider
    settings = Settings(
        embedding_provider="openai",
        embedding_base_url=base_url + "/",  # a trailing slash is fine
        embedding_model="nomic-embed-text",
        embedding_dimensions=DIMS,
        embedding_timeout_s=2.0,
    )
    embedder = make_embedder(settings)
    try:
        assert isinstance(embedder, OpenAIEmbedder)
        assert (embedder.provider, embedder.model, embedder.dimensions) == (
            "openai",
            "nomic-embed-text",
            DIMS,
        )
        await embedder.embed(["hello"])
        assert fake.requests[0].path == "/v1/embeddings"
        assert fake.requests[0].body["model"] == "nomic-embed-text"
    finally:
        await embedder.aclose()


async def test_factory_closes_only_the_client_it_built(provider: tuple[FakeProvider, str]) -> None:
    _, base_url = provider
    settings = Settings(
        embedding_provider="openai",
        embedding_base_url=base_url,
        embedding_model="m",
        embedding_dimensions=DIMS,
    )
    own = make_embedder(settings)
    assert isinstance(own, OpenAIEmbedder)
    built = own._client
    await own.aclose()
    assert built.is_closed  # built for this embedder: its aclose closes it
    async with httpx.AsyncClient() as shared:
        embedder = make_embedder(settings, client=shared)
        await embedder.embed(["hello"])
        await embedder.aclose()
        assert not shared.is_closed  # the caller's client stays the caller's


@pytest.mark.parametrize(
    ("configured", "variable"),
    [
        ({"embedding_model": "m"}, "EMBEDDING_BASE_URL"),
        ({"embedding_base_url": "http://127.0.0.1:9/v1"}, "EMBEDDING_MODEL"),
    ],
)
def test_factory_names_the_missing_variable(configured: dict[str, str], variable: str) -> None:
    with pytest.raises(SettingsError) as caught:
        make_embedder(Settings(embedding_provider="openai", **configured))
    assert caught.value.variable == variable
    assert str(caught.value) == f"{variable}: is required with EMBEDDING_PROVIDER=openai"
