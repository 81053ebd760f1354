"""What every use case needs, passed in by the composition root."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .settings import Settings

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from .embedders import Embedder


@dataclass(frozen=True)
class Deps:
    settings: Settings
    pool: "AsyncConnectionPool"
    embedder: "Embedder"
