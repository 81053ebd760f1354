"""The long-lived collaborators of one web process, built at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from memory.deps import Deps
from memory.settings import Settings

if TYPE_CHECKING:
    from auth.bearer import BearerValidator
    from auth.keys import KeyStore


class WriteQueue(Protocol):
    """Runs a write use case on a Dramatiq worker and awaits its payload."""

    async def submit(
        self, use_case: str, user_id: int, args: dict[str, Any], idempotency_key: str
    ) -> dict[str, Any]:
        """Return the use case's payload, or raise MemoryServiceError."""
        ...


@dataclass
class Runtime:
    settings: Settings
    deps: Deps
    write_queue: WriteQueue
    keystore: "KeyStore"
    bearer: "BearerValidator"
