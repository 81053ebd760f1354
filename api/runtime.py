"""The long-lived collaborators of one web process, built at start-up."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from config.settings import Settings
from memory.deps import Deps

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
    keystore: KeyStore
    bearer: BearerValidator
    #: Run in reverse order by close_runtime.
    close_hooks: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    #: What start-up did that an operator should hear about (e.g. a generated password).
    notices: list[str] = field(default_factory=list)
