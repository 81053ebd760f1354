"""The :class:`Embedder` protocol and what every embedding provider shares.

Every provider satisfies :class:`Embedder`: ``await embed(texts)`` returns a
float32 array of shape ``(len(texts), dimensions)`` whose rows are
L2-normalised, so a dot product is a cosine. One ``embed`` call is one
provider call. Every failure is a :class:`~memory.errors.MemoryServiceError`
with code ``EMBEDDING_ERROR`` and the detail
``{"status": <HTTP status or None>, "provider_message": <str or None>,
"provider": "local" | "openai"}`` (:func:`embedding_error`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

import numpy as np
import numpy.typing as npt
from opentelemetry import trace

from memory.errors import EMBEDDING_ERROR, MemoryServiceError

logger = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float32]

#: Longest provider error message kept in ``error.detail``, in characters.
PROVIDER_MESSAGE_MAX = 500

_tracer = trace.get_tracer("ownsona.embedding")


@contextlib.contextmanager
def embedding_span(provider: str, model: str, count: int) -> Iterator[trace.Span]:
    """The span of one embedding call: provider, model and how many texts, never the texts.

    Until a tracer provider is installed (bootstrap.tracing) it costs one check.
    """
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        yield trace.INVALID_SPAN
        return
    with _tracer.start_as_current_span(
        "embed",
        record_exception=False,
        attributes={"ownsona.embedding.provider": provider, "ownsona.embedding.model": model},
    ) as span:
        span.set_attribute("ownsona.embedding.texts", count)
        try:
            yield span
        except BaseException as ex:
            span.set_attribute("exception.type", type(ex).__name__)
            span.set_status(trace.Status(trace.StatusCode.ERROR))
            raise


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors."""

    #: ``"local"`` or ``"openai"``; recorded on every row as ``embedding_provider``.
    provider: str
    #: The model id recorded on every row as ``embedding_model``.
    model: str

    @property
    def dimensions(self) -> int:
        """Width of every vector; known once :meth:`ensure_ready` has returned."""
        ...

    async def ensure_ready(self) -> int:
        """Learn the vector width (a probe call if needed) and return it."""
        ...

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        """Return ``(len(texts), dimensions)`` float32, rows L2-normalised, in input order."""
        ...

    async def embed_one(self, text: str) -> FloatArray:
        """Return one L2-normalised float32 vector of length ``dimensions``."""
        ...

    async def aclose(self) -> None:
        """Release what the embedder holds (HTTP connections)."""
        ...


def embedding_error(
    message: str,
    *,
    provider: str,
    status: int | None = None,
    provider_message: str | None = None,
) -> MemoryServiceError:
    if provider_message is not None:
        provider_message = provider_message[:PROVIDER_MESSAGE_MAX]
    detail = {"status": status, "provider_message": provider_message, "provider": provider}
    return MemoryServiceError(EMBEDDING_ERROR, message, detail)


def check_texts(texts: Sequence[str]) -> None:
    # A bare str is a Sequence[str] too; embedding it character by character is a bug.
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not one str; use embed_one()")


def normalize_rows(vectors: npt.NDArray[Any], provider: str) -> FloatArray:
    """L2-normalise each row; a zero or non-finite row is a provider failure."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0.0):
        raise embedding_error(
            "The embedding provider returned a zero or non-finite vector.", provider=provider
        )
    return np.ascontiguousarray(vectors / norms, dtype=np.float32)


# --------------------------------------------------------------------------- observers

#: Told of every provider call: ``(provider, batch size, seconds, succeeded)``.
EmbedObserver = Callable[[str, int, float, bool], None]


class Observable:
    """Lets a composition root watch provider calls (metrics) without this module knowing how.

    Observers run on the caller's thread right after the call; one that
    raises is logged and ignored: watching must never fail an embedding.
    """

    provider: str
    _observers: tuple[EmbedObserver, ...] = ()

    def add_observer(self, observer: EmbedObserver) -> None:
        self._observers = (*self._observers, observer)

    def remove_observer(self, observer: EmbedObserver) -> None:
        self._observers = tuple(o for o in self._observers if o is not observer)

    def _notify(self, batch_size: int, seconds: float, ok: bool) -> None:
        for observer in self._observers:
            try:
                observer(self.provider, batch_size, seconds, ok)
            except Exception:
                logger.exception("an embedding observer failed")


_Embed = TypeVar("_Embed", bound=Callable[[Any, Sequence[str]], Awaitable[FloatArray]])


def observed(embed: _Embed) -> _Embed:
    """Time one ``embed`` call (one provider call) for the embedder's observers.

    Typed as returning ``embed`` itself, so the method keeps its signature
    (and still satisfies :class:`Embedder`).
    """

    @functools.wraps(embed)
    async def run(self: Observable, texts: Sequence[str]) -> FloatArray:
        if not self._observers or isinstance(texts, str) or len(texts) == 0:
            return await embed(self, texts)
        started = time.perf_counter()
        ok = False
        try:
            vectors = await embed(self, texts)
            ok = True
            return vectors
        finally:
            self._notify(len(texts), time.perf_counter() - started, ok)

    return cast(_Embed, run)


# --------------------------------------------------------------------------- coalescing

#: Runs one model call on a list of texts, blocking; returns one row per text, in order.
BatchRun = Callable[[list[str]], FloatArray]
#: Told of every model call the coalescer makes: ``(batch size, seconds, succeeded)``.
BatchObserver = Callable[[int, float, bool], None]


class _Request:
    __slots__ = ("future", "loop", "text")

    def __init__(self, text: str, loop: asyncio.AbstractEventLoop) -> None:
        self.text = text
        self.loop = loop
        self.future: asyncio.Future[FloatArray] = loop.create_future()


class Coalescer:
    """One thread that embeds short texts for every caller, many texts per model call.

    Callers on any event loop (the web process's, the in-process worker's)
    ``await embed_one(text)``. The thread takes every text waiting when it is
    free, up to ``max_batch``, runs them as one batch and hands each caller
    its row. It never waits for a batch to fill: a lone caller is served at
    once, and under load a batch is whatever arrived during the previous one.
    So the event loops never run the model themselves (an inline embedding
    held every other request behind it), and N concurrent queries cost one
    model call instead of N that contend for the same cores.

    A batch that fails is run again one text at a time, so only the callers
    whose own text fails get the error. A caller that stops waiting
    (cancelled) is simply not answered. The thread starts at the first call
    and ends at :meth:`close`, after answering what is queued.

    NOTE: the thread holds the GIL only to tokenise, pad and normalise;
    onnxruntime releases it for the model run itself.
    """

    def __init__(
        self,
        run: BatchRun,
        *,
        max_batch: int,
        name: str = "embed-coalescer",
        on_batch: BatchObserver | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._run = run
        self._max_batch = max_batch
        self._name = name
        self._on_batch = on_batch
        self._pending: collections.deque[_Request] = collections.deque()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    async def embed_one(self, text: str) -> FloatArray:
        request = _Request(text, asyncio.get_running_loop())
        with self._wake:
            if self._closed:
                raise RuntimeError("the embedding coalescer is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
                self._thread.start()
            self._pending.append(request)
            self._wake.notify()
        return await request.future

    def close(self, timeout_s: float = 5) -> None:
        """Answer what is queued, then stop the thread (waiting at most ``timeout_s``).

        A call made while closing is refused; one made afterwards starts a new thread.
        """
        with self._wake:
            self._closed = True
            self._wake.notify()
            thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
        with self._wake:
            self._thread = None
            self._closed = False

    def _serve(self) -> None:
        while True:
            with self._wake:
                while not self._pending and not self._closed:
                    self._wake.wait()
                if not self._pending:
                    return  # closed and drained
                take = min(len(self._pending), self._max_batch)
                batch = [self._pending.popleft() for _ in range(take)]
            # Callers that gave up are not embedded for.
            batch = [r for r in batch if not r.future.cancelled()]
            if batch:
                self._answer(batch)

    def _answer(self, batch: list[_Request]) -> None:
        try:
            vectors = self._timed([r.text for r in batch])
        except Exception as ex:
            if len(batch) == 1:
                _deliver(batch[0], None, ex)
                return
            for request in batch:  # only the texts that fail alone fail
                self._answer([request])
            return
        for request, vector in zip(batch, vectors, strict=True):
            _deliver(request, vector, None)

    def _timed(self, texts: list[str]) -> FloatArray:
        started = time.perf_counter()
        ok = False
        try:
            vectors = self._run(texts)
            ok = True
            return vectors
        finally:
            if self._on_batch is not None:
                self._on_batch(len(texts), time.perf_counter() - started, ok)


def _deliver(request: _Request, vector: FloatArray | None, error: BaseException | None) -> None:
    """Hand one caller its row (or error) on its own event loop."""

    def settle() -> None:
        if request.future.done():  # cancelled meanwhile
            return
        if error is not None:
            request.future.set_exception(error)
        else:
            request.future.set_result(vector)  # type: ignore[arg-type]

    with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
        request.loop.call_soon_threadsafe(settle)
