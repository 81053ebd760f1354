"""The OpenAI-compatible embedder: ``POST {base_url}/embeddings`` over httpx, with retries."""

from __future__ import annotations

import asyncio
import base64
import email.utils
import logging
import math
import random
import time
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt

from memory.errors import MemoryServiceError
from memory.providers import embedding
from memory.providers.embedding import FloatArray, Observable, observed

logger = logging.getLogger(__name__)

_RETRY_STATUSES = frozenset({429}) | frozenset(range(500, 600))
_RETRYABLE_TRANSPORT_ERRORS = (
    httpx.TimeoutException,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
)


class OpenAIEmbedder(Observable):
    """Any OpenAI-compatible ``POST {base_url}/embeddings`` (OpenAI, Ollama, vLLM, TEI, ...).

    ``base_url`` includes the API version, e.g. ``https://api.openai.com/v1``
    or ``http://localhost:11434/v1``: we post to
    ``{base_url.rstrip('/')}/embeddings``. One ``embed`` call is one request
    (plus retries); an empty input makes none and returns ``(0, dimensions)``,
    or ``(0, 0)`` while the width is still unknown. 429, 5xx, connection
    errors and timeouts are retried up to ``max_attempts`` attempts in all,
    with exponential back-off and jitter; a ``Retry-After`` header is honoured
    up to ``backoff_cap_s``. Other 4xx and malformed responses are not retried.
    """

    provider = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        dimensions: int | None = None,
        timeout_s: float = 30.0,
        max_attempts: int = 3,
        backoff_base_s: float = 0.5,
        backoff_cap_s: float = 10.0,
        client: httpx.AsyncClient,
        owns_client: bool = False,
    ) -> None:
        """``timeout_s`` bounds each attempt (connect, read, write, pool), in seconds.

        ``client`` is built by the composition root (``bootstrap.providers``):
        an application-wide one is shared and not closed by :meth:`aclose`;
        one built for this embedder alone comes with ``owns_client=True`` and
        :meth:`aclose` closes it.
        """
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.model = model
        self._url = f"{base_url.rstrip('/')}/embeddings"
        self._api_key = api_key
        self._configured_dimensions = dimensions
        self._dimensions = dimensions
        self._timeout = httpx.Timeout(timeout_s)
        self._max_attempts = max_attempts
        self._backoff_base_s = backoff_base_s
        self._backoff_cap_s = backoff_cap_s
        self._owns_client = owns_client
        self._client = client

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIEmbedder(url={self._url!r}, model={self.model!r})"

    @property
    def dimensions(self) -> int:
        if self._dimensions is None:
            raise RuntimeError(
                "embedding dimensions unknown: await ensure_ready() before reading them"
            )
        return self._dimensions

    async def ensure_ready(self) -> int:
        """EMBEDDING_DIMENSIONS when set, else one probe request's width."""
        if self._dimensions is None:
            await self.embed(["dimension probe"])
        assert self._dimensions is not None
        return self._dimensions

    @observed
    async def embed(self, texts: Sequence[str]) -> FloatArray:
        embedding.check_texts(texts)
        if len(texts) == 0:
            if self._dimensions is None:
                return np.empty((0, 0), dtype=np.float32)
            return np.empty((0, self._dimensions), dtype=np.float32)
        body: dict[str, Any] = {
            "model": self.model,
            "input": list(texts),
            "encoding_format": "float",
        }
        if self._configured_dimensions is not None:
            body["dimensions"] = self._configured_dimensions
        with embedding.embedding_span(self.provider, self.model, len(texts)):
            response = await self._post_with_retries(body)
        vectors = self._parse(response, len(texts))
        if self._dimensions is None:
            self._dimensions = vectors.shape[1]
        return vectors

    async def embed_one(self, text: str) -> FloatArray:
        vectors = await self.embed([text])
        vector: FloatArray = vectors[0]
        return vector

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def _post_with_retries(self, body: dict[str, Any]) -> httpx.Response:
        headers = {"Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._client.post(
                    self._url, json=body, headers=headers, timeout=self._timeout
                )
            except _RETRYABLE_TRANSPORT_ERRORS as ex:
                if attempt >= self._max_attempts:
                    raise self._transport_error(ex, attempt) from ex
                delay = self._backoff(attempt, None)
                logger.warning(
                    "embedding request failed (%s), attempt %d/%d; retrying in %.2fs",
                    type(ex).__name__,
                    attempt,
                    self._max_attempts,
                    delay,
                )
            except httpx.HTTPError as ex:  # bad URL scheme and the like: not transient
                raise self._transport_error(ex, attempt) from ex
            else:
                if 200 <= response.status_code < 300:
                    return response
                if response.status_code not in _RETRY_STATUSES or attempt >= self._max_attempts:
                    raise self._status_error(response, attempt)
                delay = self._backoff(attempt, response.headers.get("Retry-After"))
                logger.warning(
                    "embedding provider answered HTTP %d, attempt %d/%d; retrying in %.2fs",
                    response.status_code,
                    attempt,
                    self._max_attempts,
                    delay,
                )
            await asyncio.sleep(delay)

    def _backoff(self, attempt: int, retry_after: str | None) -> float:
        """Seconds to wait before attempt ``attempt + 1``."""
        if retry_after is not None:
            seconds = _parse_retry_after(retry_after)
            if seconds is not None:
                return min(seconds, self._backoff_cap_s)
        exponential: float = min(self._backoff_cap_s, self._backoff_base_s * 2 ** (attempt - 1))
        return exponential * random.uniform(0.5, 1.0)  # noqa: S311 (jitter, not crypto)

    def _transport_error(self, ex: httpx.HTTPError, attempts: int) -> MemoryServiceError:
        if isinstance(ex, httpx.TimeoutException):
            what = f"did not answer within {self._timeout.read}s"
        elif isinstance(ex, httpx.ConnectError):
            what = "could not be reached"
        else:
            what = f"failed ({type(ex).__name__})"
        return embedding.embedding_error(
            f"The embedding provider {what} after {_attempts(attempts)}; "
            "try again later or check EMBEDDING_BASE_URL.",
            provider="openai",
            provider_message=str(ex) or type(ex).__name__,
        )

    def _status_error(self, response: httpx.Response, attempts: int) -> MemoryServiceError:
        status = response.status_code
        if status < 400:
            hint = "it redirected; set EMBEDDING_BASE_URL to the final URL, ending in /v1"
        elif status in (401, 403):
            hint = "it rejected the credentials; check EMBEDDING_API_KEY"
        elif status == 404:
            hint = "check EMBEDDING_BASE_URL (it should end in /v1) and EMBEDDING_MODEL"
        elif status == 429:
            hint = "it is rate-limiting us; try again later"
        elif status >= 500:
            hint = "try again later"
        else:
            hint = "it rejected the request (a text may be too long for the model)"
        return embedding.embedding_error(
            f"The embedding provider answered HTTP {status} after {_attempts(attempts)}: {hint}.",
            provider="openai",
            status=status,
            provider_message=_provider_message(response),
        )

    def _parse(self, response: httpx.Response, expected: int) -> FloatArray:
        """Validate an embeddings response and return its vectors, normalised, in input order."""
        status = response.status_code

        def bad(why: str) -> MemoryServiceError:
            return embedding.embedding_error(
                f"The embedding provider returned an unusable response: {why}.",
                provider="openai",
                status=status,
            )

        try:
            payload = response.json()
        except ValueError as ex:
            raise bad("not JSON") from ex
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise bad('no "data" list')
        if len(data) != expected:
            raise bad(f"{len(data)} embeddings for {expected} inputs")
        if not all(isinstance(item, dict) for item in data):
            raise bad('an item of "data" is not an object')
        indexes = [item.get("index") for item in data]
        if all(index is None for index in indexes):
            ordered = data  # no indexes at all: take the order as given
        elif sorted(i for i in indexes if isinstance(i, int) and not isinstance(i, bool)) != list(
            range(expected)
        ):
            raise bad('the "index" values are not 0..n-1 exactly once each')
        else:
            ordered = sorted(data, key=lambda item: item["index"])
        rows = []
        for item in ordered:
            row = _decode_embedding(item.get("embedding"))
            if row is None:
                raise bad('an "embedding" is not a list of numbers')
            rows.append(row)
        width = rows[0].shape[0]
        if width == 0:
            raise bad("an empty embedding")
        if any(row.shape[0] != width for row in rows):
            raise bad("the embeddings differ in length")
        wanted = self._dimensions
        if wanted is not None and width != wanted:
            source = (
                "EMBEDDING_DIMENSIONS"
                if self._configured_dimensions is not None
                else "the provider's earlier answers"
            )
            raise bad(f"embeddings of {width} dimensions, expected {wanted} ({source})")
        vectors = np.stack(rows)
        norms = np.linalg.norm(vectors, axis=1)
        if not np.all(np.isfinite(norms)) or np.any(norms == 0.0):
            raise bad("a zero or non-finite vector")
        return embedding.normalize_rows(vectors, "openai")


def _attempts(n: int) -> str:
    return "1 attempt" if n == 1 else f"{n} attempts"


def _decode_embedding(raw: object) -> npt.NDArray[np.float64] | None:
    """A list of numbers (or base64 float32, for servers that ignore encoding_format)."""
    if isinstance(raw, str):
        try:
            buffer = base64.b64decode(raw, validate=True)
        except ValueError:
            return None
        if len(buffer) % 4:
            return None
        return np.frombuffer(buffer, dtype="<f4").astype(np.float64)
    if not isinstance(raw, list) or any(
        isinstance(x, bool) or not isinstance(x, (int, float)) for x in raw
    ):
        return None
    return np.asarray(raw, dtype=np.float64)


def _provider_message(response: httpx.Response) -> str | None:
    """The provider's own error text: OpenAI ``error.message``, else what it sent."""
    try:
        payload = response.json()
    except ValueError:
        text = response.text.strip()
        return text[: embedding.PROVIDER_MESSAGE_MAX] or None
    message: object = None
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict):
            message = error.get("message")
        elif isinstance(error, str):  # Ollama, TEI
            message = error
        if message is None:
            message = payload.get("message") or payload.get("detail")  # vLLM, FastAPI
    if message is None:
        message = response.text.strip()
    return str(message)[: embedding.PROVIDER_MESSAGE_MAX] or None


def _parse_retry_after(value: str) -> float | None:
    """Retry-After as seconds (RFC 9110 §10.2.3: delay-seconds or an HTTP-date)."""
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    if math.isnan(seconds):
        return None
    return max(0.0, seconds)
