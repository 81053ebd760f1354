"""The long-lived collaborators of one web process, and the lifespan that opens them.

``bootstrap.web`` builds both; tests build a :class:`Runtime` of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from config.settings import Settings
from memory.deps import Deps

if TYPE_CHECKING:
    from auth.bearer import BearerValidator
    from auth.keys import KeyStore
    from auth.metadata_fetch import MetadataFetcher
    from memory.audit import AuditLog
    from memory.commands import Command


class WriteQueue(Protocol):
    """Runs a write use case on a Dramatiq worker and awaits its payload."""

    async def submit(self, command: Command, user_id: int, idempotency_key: str) -> dict[str, Any]:
        """The worker's payload for ``command``, error payloads included.

        Raises only when the queue itself fails (broker down, no answer in time).
        """
        ...


class Lifespan(Protocol):
    """Opens a runtime's collaborators on ASGI startup and closes them on shutdown."""

    async def open(self) -> None:
        """Open everything, or close what was opened and raise."""
        ...

    async def close(self) -> None:
        """Close what was opened; never raises."""
        ...


@dataclass
class Runtime:
    """What the app's resources receive, built before the app (opened or not yet)."""

    settings: Settings
    deps: Deps
    write_queue: WriteQueue
    keystore: KeyStore
    bearer: BearerValidator
    #: Fetches client ID metadata documents; None: such client ids are refused.
    metadata_fetcher: MetadataFetcher | None = None
    #: Where every tool call is recorded; None: ``create_app`` makes one over the pool,
    #: written only when flushed (nothing owns a background writer for it).
    audit: AuditLog | None = None
