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
:func:`bootstrap.providers.make_embedder`, then
``dims = await embedder.ensure_ready()`` and only then migrates (the vector
columns are ``vector(dims)``). The local model knows its width at load; the
OpenAI provider uses ``EMBEDDING_DIMENSIONS`` when set and otherwise makes
one probe request. Reading ``dimensions`` on an OpenAI embedder whose width
is still unknown raises :class:`RuntimeError` (a wiring bug, not a user
error).

Neither provider logs the texts or the API key. ``add_observer`` lets the
composition root time every provider call (``api.metrics``) without the
providers knowing who watches.

The modules: :mod:`memory.providers.embedding` (the protocol and the shared
helpers), :mod:`memory.providers.local_embedder` and
:mod:`memory.providers.openai_embedder`; this module re-exports their public
names.
"""

from memory.providers.embedding import Embedder, EmbedObserver, FloatArray
from memory.providers.local_embedder import (
    COALESCE_MAX_CHARS,
    LOCAL_MAX_TOKENS,
    LOCAL_MODEL_ID,
    LOCAL_MODEL_SHA256,
    LOCAL_SUB_BATCH_SIZE,
    LocalEmbedder,
)
from memory.providers.openai_embedder import OpenAIEmbedder

__all__ = [
    "COALESCE_MAX_CHARS",
    "LOCAL_MAX_TOKENS",
    "LOCAL_MODEL_ID",
    "LOCAL_MODEL_SHA256",
    "LOCAL_SUB_BATCH_SIZE",
    "EmbedObserver",
    "Embedder",
    "FloatArray",
    "LocalEmbedder",
    "OpenAIEmbedder",
]
