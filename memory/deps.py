"""What every use case needs, passed in by the composition root."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from config.settings import Settings

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from memory.keyring import Keyring
    from memory.providers.embedders import Embedder
    from memory.providers.extractors import Extractor
    from memory.providers.facts import FactExtractor
    from memory.recall.rerank import RerankStage

#: ``(user_id, memory_ids)``: memories whose text was just stored or changed.
TextStoredHook = Callable[[int, list[int]], None]


@dataclass(frozen=True)
class Deps:
    settings: Settings
    pool: AsyncConnectionPool
    embedder: Embedder
    #: Sends relation-extraction jobs for memories the outbox owes them to: after
    #: a write that stored or changed memory text has committed (never inside its
    #: transaction), and from the outbox sweep. The composition root makes it
    #: enqueue ``extract_relations``. None: nothing is sent (the outbox keeps the
    #: entries). It must not block for long; it runs in a worker thread, and it
    #: raises when the broker cannot be reached (the entries then stay due).
    on_text_stored: TextStoredHook | None = None
    #: The relation extractor; None: extraction is off. The composition root
    #: (``bootstrap``) passes ``make_extractor(settings)`` wherever extraction runs:
    #: the workers, the in-process worker and ``ownsona relations rebuild``.
    extractor: Extractor | None = None
    #: The chat import's fact extractor (an LLM: LLM_BASE_URL and LLM_MODEL); None:
    #: not configured, and a chat import can only store the user's own messages.
    fact_extractor: FactExtractor | None = None
    #: Recall's second stage (RERANK_PROVIDER); None: recall returns its first ranking.
    reranker: RerankStage | None = None
    #: Per-user keys for sealing at rest (docs/at-rest.md); None: the deployment is unsealed.
    keyring: Keyring | None = None
