"""Building the embedder and the relation extractor from the settings.

The HTTP clients the OpenAI-compatible providers talk through are built here
too, so nothing under ``memory/`` opens a connection pool of its own.
"""

from __future__ import annotations

import logging

import httpx

from config.settings import Settings, SettingsError
from memory.providers.embedders import Embedder, LocalEmbedder, OpenAIEmbedder
from memory.providers.extractors import Extractor, LLMExtractor, RulesExtractor
from memory.providers.fact_extractor import LLMFactExtractor
from memory.providers.reranker import HttpReranker, shown_url
from memory.recall.rerank import RerankStage

_log = logging.getLogger(__name__)

__all__ = [
    "embedding_client",
    "extraction_client",
    "make_embedder",
    "make_extractor",
    "make_fact_extractor",
    "make_rerank_stage",
    "rerank_endpoint",
]


def embedding_client(settings: Settings) -> httpx.AsyncClient | None:
    """The HTTP client the embedding provider talks through; None for the local model.

    Only built when it is used: an ``httpx.AsyncClient`` costs about 0.1 s to
    build (its TLS context), a tenth of a server's start-up.
    """
    return httpx.AsyncClient() if settings.embedding_provider == "openai" else None


def extraction_client(settings: Settings) -> httpx.AsyncClient | None:
    """The HTTP client the LLM extractor talks through; None for the others."""
    return httpx.AsyncClient() if settings.relation_extractor == "llm" else None


def make_embedder(
    settings: Settings,
    *,
    client: httpx.AsyncClient | None = None,
    intra_op_threads: int | None = None,
) -> Embedder:
    """The embedder ``settings`` ask for; blocking (the local model loads here).

    Local: ``EMBEDDING_MODEL_DIR`` (``model.onnx`` + ``tokenizer.json``)
    replaces the bundled, checksum-verified model. ``EMBEDDING_DIMENSIONS``,
    when set, must equal the local model's width; ``intra_op_threads``, else
    ``EMBEDDING_THREADS``, else every CPU runs each model call. OpenAI: ``client`` is an
    optional shared ``httpx.AsyncClient``, which the embedder's ``aclose``
    leaves open; without one a client is built for the embedder alone, and
    its ``aclose`` closes it. Call ``await ensure_ready()`` afterwards to
    learn the width.
    """
    if settings.embedding_provider == "openai":
        base_url, model = _endpoint(
            "EMBEDDING",
            settings.embedding_base_url,
            settings.embedding_model,
            "EMBEDDING_PROVIDER=openai",
        )
        return OpenAIEmbedder(
            base_url=base_url,
            model=model,
            api_key=settings.embedding_api_key,
            dimensions=settings.embedding_dimensions,
            timeout_s=settings.embedding_timeout_s,
            client=client if client is not None else httpx.AsyncClient(),
            owns_client=client is None,
        )
    if settings.embedding_provider != "local":
        raise SettingsError(
            "EMBEDDING_PROVIDER", f"unknown provider {settings.embedding_provider!r}"
        )
    model_dir = settings.embedding_model_dir
    intra_op_threads = intra_op_threads or settings.embedding_threads
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


def rerank_endpoint(settings: Settings) -> str | None:
    """Where the reranker is asked, as an operator may be shown it (no user:password)."""
    if settings.rerank_provider == "off" or not settings.rerank_base_url:
        return None
    return shown_url(f"{settings.rerank_base_url.rstrip('/')}/rerank")


def make_rerank_stage(settings: Settings) -> RerankStage | None:
    """Recall's second stage RERANK_PROVIDER asks for; None when it is ``off``.

    The reranker gets an HTTP client of its own, which its ``aclose`` closes.
    """
    if settings.rerank_provider == "off":
        return None
    if not settings.rerank_base_url:
        raise SettingsError(
            "RERANK_BASE_URL", f"is required with RERANK_PROVIDER={settings.rerank_provider}"
        )
    reranker = HttpReranker(
        style=settings.rerank_provider,
        base_url=settings.rerank_base_url,
        model=settings.rerank_model,
        api_key=settings.rerank_api_key,
        timeout_s=settings.rerank_timeout_s,
        client=httpx.AsyncClient(),
        owns_client=True,
    )
    if settings.rerank_provider == "jina" and not settings.rerank_model:
        # Jina's and Cohere's APIs refuse a request without one; self-hosted servers do not.
        _log.warning("RERANK_MODEL is not set: Jina's and Cohere's rerank APIs require one")
    return RerankStage(reranker, depth=settings.rerank_candidates)


def make_extractor(
    settings: Settings, *, client: httpx.AsyncClient | None = None
) -> Extractor | None:
    """The extractor ``RELATION_EXTRACTOR`` asks for; None when it is ``off``.

    LLM: ``client`` is an optional shared ``httpx.AsyncClient`` (left open);
    without one each extraction opens its own client and closes it.
    """
    if settings.relation_extractor == "off":
        return None
    if settings.relation_extractor == "rules":
        return RulesExtractor()
    if settings.relation_extractor == "llm":
        base_url, model = _endpoint(
            "LLM", settings.llm_base_url, settings.llm_model, "RELATION_EXTRACTOR=llm"
        )
        return LLMExtractor(
            base_url=base_url,
            model=model,
            api_key=settings.llm_api_key,
            client=client if client is not None else httpx.AsyncClient,
        )
    raise SettingsError("RELATION_EXTRACTOR", f"unknown extractor {settings.relation_extractor!r}")


def make_fact_extractor(settings: Settings) -> LLMFactExtractor | None:
    """The chat import's fact extractor: configured when LLM_BASE_URL and LLM_MODEL are set.

    It uses the relation extractor's LLM settings whatever ``RELATION_EXTRACTOR``
    says; each extraction opens its own HTTP client and closes it.
    """
    if not (settings.llm_base_url and settings.llm_model):
        return None
    return LLMFactExtractor(
        base_url=settings.llm_base_url,
        model=settings.llm_model,
        api_key=settings.llm_api_key,
        client=httpx.AsyncClient,
    )


def _endpoint(
    prefix: str, base_url: str | None, model: str | None, setting: str
) -> tuple[str, str]:
    """An OpenAI-compatible endpoint's base URL and model, both required with ``setting``.

    ``prefix`` names the variables: ``EMBEDDING`` -> ``EMBEDDING_BASE_URL``,
    ``EMBEDDING_MODEL``.
    """
    for variable, value in ((f"{prefix}_BASE_URL", base_url), (f"{prefix}_MODEL", model)):
        if not value:
            raise SettingsError(variable, f"is required with {setting}")
    assert base_url is not None and model is not None
    return base_url, model
