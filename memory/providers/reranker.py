"""A cross-encoder behind an HTTP ``/rerank`` endpoint: recall's optional second stage.

Two wire formats, the ones rerank servers speak today:

- ``tei``: Hugging Face text-embeddings-inference. ``POST {base_url}/rerank``
  with ``{"query", "texts", "truncate": true}``, at most :data:`TEI_BATCH`
  texts per request (its ``--max-client-batch-size`` default); the answer is a
  list of ``{"index", "score"}``.
- ``jina``: Jina's ``/v1/rerank``, also spoken by Cohere (``/v2/rerank``),
  vLLM and llama.cpp's OpenAI-compatible servers, and Infinity.
  ``POST {base_url}/rerank`` with ``{"model", "query", "documents", "top_n"}``;
  the answer is ``{"results": [{"index", "relevance_score"}]}``.

Only the order of the scores is used. Failures raise
:class:`~memory.recall.rerank.RerankError`, whose message names the endpoint and what went wrong, never a text or the key.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from memory.recall.rerank import RerankError

logger = logging.getLogger(__name__)

#: The wire formats RERANK_PROVIDER may name ("off" turns the stage off).
RERANK_STYLES = ("tei", "jina")
#: A document is cut to this many characters (at a space) before it is sent. A
#: cross-encoder reads at most 512 tokens of query and document together, about
#: 2,000 characters of English, so a 16,000-character memory would only cost
#: bandwidth, and some servers (vLLM) refuse an input over the model's length.
MAX_DOCUMENT_CHARS = 2000
#: The question is cut to this many characters: a model reads it beside each document.
MAX_QUERY_CHARS = 1000
#: Most texts in one TEI request (TEI answers 422 above its ``--max-client-batch-size``,
#: 32 by default); more are sent as several requests at once.
TEI_BATCH = 32
#: Answers that refuse the request's own input: the endpoint itself is fine.
_INPUT_REFUSED = frozenset({400, 413, 422})

#: ``(seconds, ok)`` of one call, for the composition root's metrics.
RerankObserver = Callable[[float, bool], None]


def clip(text: str, limit: int = MAX_DOCUMENT_CHARS) -> str:
    """``text`` cut to at most ``limit`` characters, at the last space when there is one."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    space = head.rfind(" ")
    return head[:space] if space > limit // 2 else head


class HttpReranker:
    """One ``POST {base_url}/rerank`` per call, bounded by ``timeout_s`` in all; no retries.

    Recall waits for the answer, so a retry would only double a slow reranker's
    cost: the caller falls back to the first ranking instead.
    """

    def __init__(
        self,
        *,
        style: str,
        base_url: str,
        model: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 5.0,
        client: httpx.AsyncClient,
        owns_client: bool = False,
    ) -> None:
        if style not in RERANK_STYLES:
            raise ValueError(f"unknown rerank style {style!r}")
        self.style = style
        self.model = model
        self._url = f"{base_url.rstrip('/')}/rerank"
        #: The URL as messages and logs show it: without any user:password.
        self.endpoint = shown_url(self._url)
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._client = client
        self._owns_client = owns_client
        self._observers: tuple[RerankObserver, ...] = ()

    def __repr__(self) -> str:  # never show the key
        return f"HttpReranker(style={self.style!r}, url={self.endpoint!r}, model={self.model!r})"

    def add_observer(self, observer: RerankObserver) -> None:
        self._observers = (*self._observers, observer)

    def remove_observer(self, observer: RerankObserver) -> None:
        self._observers = tuple(o for o in self._observers if o is not observer)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float | None]:
        if not documents:
            return []
        query = clip(query, MAX_QUERY_CHARS)
        texts = [clip(d) for d in documents]
        batch = TEI_BATCH if self.style == "tei" else len(texts)
        started = time.perf_counter()
        ok = False
        try:
            parts = await asyncio.gather(
                *(self._rerank(query, texts[i : i + batch]) for i in range(0, len(texts), batch))
            )
            ok = True
            return [score for part in parts for score in part]
        except asyncio.CancelledError:
            ok = True  # the caller gave up (a client went away): no failure of the reranker's
            raise
        finally:
            self._notify(time.perf_counter() - started, ok)

    async def _rerank(self, query: str, documents: list[str]) -> list[float | None]:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        try:
            # httpx's timeout bounds each read; this bounds the whole exchange.
            async with asyncio.timeout(self._timeout_s):
                response = await self._client.post(
                    self._url,
                    json=self._body(query, documents),
                    headers=headers,
                    timeout=httpx.Timeout(self._timeout_s),
                )
        except (TimeoutError, httpx.TimeoutException):
            raise RerankError(
                f"{self.endpoint} did not answer within {self._timeout_s:g} s"
            ) from None
        except (httpx.HTTPError, httpx.InvalidURL) as ex:
            raise RerankError(
                f"{self.endpoint} could not be reached ({type(ex).__name__})"
            ) from None
        if response.status_code != 200:
            raise RerankError(
                f"{self.endpoint} answered HTTP {response.status_code}",
                endpoint_failed=response.status_code not in _INPUT_REFUSED,
            )
        try:
            payload = response.json()
        except (ValueError, RecursionError):
            raise RerankError(f"{self.endpoint} answered with something other than JSON") from None
        return self._scores(payload, len(documents))

    def _body(self, query: str, documents: list[str]) -> dict[str, Any]:
        if self.style == "tei":
            return {"query": query, "texts": documents, "truncate": True}
        body: dict[str, Any] = {"query": query, "documents": documents, "top_n": len(documents)}
        if self.model:
            body["model"] = self.model
        return body

    def _scores(self, payload: Any, count: int) -> list[float | None]:
        """The scores in document order: every index at most once, every score a finite
        number; a document left out (a server capping ``top_n``) is None."""
        if self.style == "tei":
            entries, key = payload, "score"
        else:
            entries = payload.get("results") if isinstance(payload, dict) else None
            key = "relevance_score"
        if not isinstance(entries, list):
            raise RerankError(f"{self.endpoint} answered without a list of scores")
        if count and not entries:
            raise RerankError(f"{self.endpoint} scored none of {count} documents")
        scores: list[float | None] = [None] * count
        for entry in entries:
            index = entry.get("index") if isinstance(entry, dict) else None
            score = _number(entry.get(key)) if isinstance(entry, dict) else None
            if (
                not isinstance(index, int)
                or isinstance(index, bool)
                or not 0 <= index < count
                or scores[index] is not None
                or score is None
            ):
                raise RerankError(f"{self.endpoint} answered with a malformed score entry")
            scores[index] = score
        return scores

    def _notify(self, seconds: float, ok: bool) -> None:
        for observer in self._observers:
            try:
                observer(seconds, ok)
            except Exception:
                logger.exception("a rerank observer failed")


def _number(value: Any) -> float | None:
    """``value`` as a finite float; None for anything else (strings, booleans, 1e400)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def shown_url(url: str) -> str:
    """``url`` without the ``user:password@`` a base URL may carry."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit(parts._replace(netloc=netloc))
