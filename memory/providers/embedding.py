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

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

import numpy as np
import numpy.typing as npt

from memory.errors import EMBEDDING_ERROR, MemoryServiceError

logger = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float32]

#: Longest provider error message kept in ``error.detail``, in characters.
PROVIDER_MESSAGE_MAX = 500


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
