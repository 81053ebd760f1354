"""A cross-encoder behind an HTTP ``/rerank`` endpoint: recall's optional second stage.

Two wire formats, the ones rerank servers speak today:

- ``tei``: Hugging Face text-embeddings-inference. ``POST {base_url}/rerank``
  with ``{"query", "texts", "truncate": true}``; the answer is a list of
  ``{"index", "score"}``.
- ``jina``: Jina's ``/v1/rerank``, also spoken by Cohere (``/v2/rerank``),
  vLLM and llama.cpp's OpenAI-compatible servers, and Infinity.
  ``POST {base_url}/rerank`` with ``{"model", "query", "documents", "top_n"}``;
  the answer is ``{"results": [{"index", "relevance_score"}]}``.

Only the order of the scores is used. Failures raise
:class:`~memory.recall_rerank.RerankError`, whose message names the endpoint and what went wrong, never a text or the key.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from memory.recall_rerank import RerankError

logger = logging.getLogger(__name__)

#: The wire formats RERANK_PROVIDER may name ("off" turns the stage off).
RERANK_STYLES = ("tei", "jina")
#: A document is cut to this many characters (at a space) before it is sent. A
#: cross-encoder reads at most 512 tokens of query and document together, about
#: 2,000 characters of English, so a 16,000-character memory would only cost
#: bandwidth, and some servers (vLLM) refuse an input over the model's length.
MAX_DOCUMENT_CHARS = 2000

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
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._client = client
        self._owns_client = owns_client
        self._observers: tuple[RerankObserver, ...] = ()

    def __repr__(self) -> str:  # never show the key
        return f"HttpReranker(style={self.style!r}, url={self._url!r}, model={self.model!r})"

    def add_observer(self, observer: RerankObserver) -> None:
        self._observers = (*self._observers, observer)

    def remove_observer(self, observer: RerankObserver) -> None:
        self._observers = tuple(o for o in self._observers if o is not observer)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        if not documents:
            return []
        started = time.perf_counter()
        ok = False
        try:
            scores = await self._rerank(query, [clip(d) for d in documents])
            ok = True
            return scores
        finally:
            self._notify(time.perf_counter() - started, ok)

    async def _rerank(self, query: str, documents: list[str]) -> list[float]:
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
        except TimeoutError:
            raise RerankError(f"{self._url} did not answer within {self._timeout_s:g} s") from None
        except httpx.HTTPError as ex:
            raise RerankError(f"{self._url} could not be reached ({type(ex).__name__})") from None
        if response.status_code != 200:
            raise RerankError(f"{self._url} answered HTTP {response.status_code}")
        try:
            payload = response.json()
        except ValueError:
            raise RerankError(f"{self._url} answered with something other than JSON") from None
        return self._scores(payload, len(documents))

    def _body(self, query: str, documents: list[str]) -> dict[str, Any]:
        if self.style == "tei":
            return {"query": query, "texts": documents, "truncate": True}
        body: dict[str, Any] = {
            "query": query,
            "documents": documents,
            "top_n": len(documents),
            "return_documents": False,
        }
        if self.model:
            body["model"] = self.model
        return body

    def _scores(self, payload: Any, count: int) -> list[float]:
        """The scores in document order; every index once, every score a finite number."""
        if self.style == "tei":
            entries, key = payload, "score"
        else:
            entries = payload.get("results") if isinstance(payload, dict) else None
            key = "relevance_score"
        if not isinstance(entries, list):
            raise RerankError(f"{self._url} answered without a list of scores")
        scores: list[float | None] = [None] * count
        for entry in entries:
            index = entry.get("index") if isinstance(entry, dict) else None
            score = entry.get(key) if isinstance(entry, dict) else None
            if (
                not isinstance(index, int)
                or isinstance(index, bool)
                or not 0 <= index < count
                or scores[index] is not None
                or not isinstance(score, int | float)
                or isinstance(score, bool)
                or not math.isfinite(score)
            ):
                raise RerankError(f"{self._url} answered with a malformed score entry")
            scores[index] = float(score)
        if any(s is None for s in scores):
            raise RerankError(f"{self._url} scored {len(entries)} of {count} documents")
        return [s for s in scores if s is not None]

    def _notify(self, seconds: float, ok: bool) -> None:
        for observer in self._observers:
            try:
                observer(seconds, ok)
            except Exception:
                logger.exception("a rerank observer failed")
