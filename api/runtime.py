"""The long-lived collaborators of one web process, and the lifespan that opens them.

``bootstrap.web`` builds both; tests build a :class:`Runtime` of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from config.settings import Settings
from memory.calls import CallMeta
from memory.commands import Command
from memory.deps import Deps
from memory.handlers import dispatch

if TYPE_CHECKING:
    from api.console.jobs import Jobs
    from api.oauth_services import OAuthOptions
    from auth.bearer import BearerValidator
    from auth.keys import KeyStore
    from auth.metadata_fetch import MetadataFetcher
    from memory.audit import AuditLog


class WriteQueue(Protocol):
    """Runs a command on a worker and awaits its payload (``tasks.queue`` implements it).

    The API knows the queue only as this interface: it imports nothing of ``tasks``.
    """

    async def submit(self, meta: CallMeta, command: Command) -> dict[str, Any]:
        """The worker's payload for ``command`` run as ``meta``, error payloads included.

        Raises only when the queue itself fails (broker down, no answer in time).
        """
        ...


class CommandRunner(Protocol):
    """Runs a command in this process (``memory.handlers.dispatch``)."""

    async def __call__(self, deps: Deps, meta: CallMeta, command: Command) -> dict[str, Any]:
        """The command's payload; raises MemoryServiceError (the tool's error)."""
        ...


class ReplicaStates(Protocol):
    """The read replicas' states (``storage.replicas.ReplicaSet``), for /readyz and /metrics."""

    def status(self) -> list[Any]:
        """One ``ReplicaStatus`` (name, state, lag_s, reads) per replica."""
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
    #: Runs the inline tools' commands (the handler table's dispatch; tests record instead).
    run_inline: CommandRunner = dispatch
    #: The sign-in throttle and console session lifetime; None: the defaults.
    oauth_options: OAuthOptions | None = None
    #: The console's background jobs; None: ``create_app`` makes them over the pool and
    #: stops them on shutdown (tests pass their own, which they stop).
    console_jobs: Jobs | None = None
    #: The read replicas (DATABASE_REPLICA_URLS), shown by /readyz and /metrics; None: none.
    replicas: ReplicaStates | None = None
