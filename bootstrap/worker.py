"""Dramatiq workers: the broker, the actors, and the Deps the actors run with.

One builder for every worker of OwnSona: ``ownsona worker`` (Redis), the
in-process worker of the embedded default (``ownsona serve`` or uvicorn
without ``REDIS_URL``), and ``ownsona reembed``'s workers. A process that
only sends messages (a web process next to separate workers) gets its
broker and actors from here too, without a worker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dramatiq
import httpx

from config.settings import Settings
from memory.deps import Deps
from memory.providers.embedders import Embedder
from storage.errors import StorageError
from storage.schema import check_schema
from tasks.actors import Actors, WorkerResources, declare_actors, extraction_hook, reembed_queue
from tasks.broker import BrokerBundle, BrokerRefused, BrokerUnreachable, check_broker, make_broker
from tasks.redis_clients import RedisTarget
from tasks.shutdown import RunningMessages, stop_on_signals, stop_worker
from tasks.tracing import TraceMiddleware

from .database import DatabaseAddress, open_deps
from .providers import embedding_client, extraction_client, make_embedder, make_extractor
from .sealing import build_keyring, open_keyring
from .tracing import start_tracing

#: A Redis worker's longest idle wait for a message, in milliseconds (Dramatiq's worker_timeout).
REDIS_WORKER_TIMEOUT_MS = 1000


class ActorDeps:
    """Builds the Deps a worker's actors run with, on the worker's event loop, and closes them.

    ``conninfo`` is the database (a DSN or the process's
    :class:`~bootstrap.database.DatabaseAddress`); the worker gets a pool of
    its own, since its event loop is not the web process's. ``owns_embedder``:
    the worker readies the embedder at boot and closes it at shutdown (a
    worker process), rather than sharing the web process's. ``extraction``:
    the actors enqueue relation extraction for the text they store, and run it,
    with an HTTP client of the worker's event loop (for an LLM extractor).
    ``http`` is the embedder's client when the worker owns the embedder: it
    is closed with it.
    """

    def __init__(
        self,
        settings: Settings,
        conninfo: str | DatabaseAddress,
        embedder: Embedder,
        *,
        name: str = "worker",
        owns_embedder: bool = False,
        check_schema_first: bool = False,
        extraction: bool = True,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self._settings = settings
        self._conninfo = conninfo
        self._embedder = embedder
        self._name = name
        self._owns_embedder = owns_embedder
        self._check_schema = check_schema_first
        self._extraction = extraction
        self._embedder_http = http
        self._extractor_http: httpx.AsyncClient | None = None
        #: Declared once the broker exists (:func:`build_broker`); the extraction hook sends on them.
        self.actors: Actors | None = None
        #: What opening the keyring has to tell the operator (unsealed, a generated key).
        self.notices: list[str] = []

    async def build(self) -> Deps:
        if self._owns_embedder:
            await self._embedder.ensure_ready()
        plain = await open_deps(self._settings, self._conninfo, self._embedder, name=self._name)
        pool = plain.pool
        try:
            if self._check_schema:
                async with pool.connection() as conn:
                    await check_schema(conn)
            # The worker's own keyring, on its event loop; a wrong master key stops it here.
            dsn = self._conninfo if isinstance(self._conninfo, str) else await self._conninfo()
            sealing = build_keyring(self._settings, dsn)
            await open_keyring(sealing, dsn)
            self.notices = sealing.notices
            plain = dataclasses.replace(plain, keyring=sealing.keyring)
        except BaseException:
            await pool.close()
            raise
        if not self._extraction:
            return plain
        assert self.actors is not None, "build_broker declares the actors before any worker boots"
        # Made here, on the worker's event loop, whose connections it keeps.
        self._extractor_http = extraction_client(self._settings)
        return dataclasses.replace(
            plain,
            on_text_stored=extraction_hook(self.actors),
            extractor=make_extractor(self._settings, client=self._extractor_http),
        )

    async def close(self, deps: Deps) -> None:
        await deps.pool.close()
        if deps.keyring is not None:
            await deps.keyring.close()
        if self._extractor_http is not None:
            await self._extractor_http.aclose()
            self._extractor_http = None
        if self._owns_embedder:
            await self._embedder.aclose()
            if self._embedder_http is not None:
                await self._embedder_http.aclose()


@dataclass(frozen=True)
class Broker:
    """A process's broker, its actors, and (when it runs a worker) the worker's resources."""

    bundle: BrokerBundle
    actors: Actors
    resources: WorkerResources | None

    def worker(self, threads: int, *, timeout_ms: int, queues: set[str] | None = None) -> Any:
        """A Dramatiq worker over this broker (not started)."""
        return dramatiq.Worker(
            self.bundle.broker, queues=queues, worker_threads=threads, worker_timeout=timeout_ms
        )


def build_broker(
    settings: Settings,
    *,
    actor_deps: ActorDeps | None = None,
    extra_middleware: Sequence[Any] = (),
    reembed_queue_name: str | None = None,
) -> Broker:
    """The broker REDIS_URL or REDIS_SENTINELS names (in-process without either) and its actors.

    With ``actor_deps`` the broker carries a worker's resources: a worker
    started on it opens them at boot. Nothing connects here.
    """
    resources = WorkerResources(actor_deps.build, actor_deps.close) if actor_deps else None
    bundle = make_broker(
        RedisTarget.from_settings(settings),
        namespace=settings.queue_namespace,
        heartbeat_timeout_ms=settings.queue_heartbeat_timeout_ms,
        extra_middleware=[
            *([resources] if resources else []),
            # One trace from web to worker: the context rides in each message.
            *([TraceMiddleware()] if settings.trace_endpoint else []),
            *extra_middleware,
        ],
    )
    actors = (
        declare_actors(bundle.broker)
        if reembed_queue_name is None
        else declare_actors(bundle.broker, reembed_queue_name=reembed_queue_name)
    )
    if actor_deps is not None:
        actor_deps.actors = actors
    return Broker(bundle=bundle, actors=actors, resources=resources)


def require_broker(bundle: BrokerBundle) -> None:
    """Raise StorageError naming the setting when Redis does not answer (address, TLS, auth),
    or when the Sentinels know no master of REDIS_SENTINEL_MASTER's name."""
    try:
        check_broker(bundle)
    except BrokerRefused as ex:
        raise StorageError(str(ex)) from ex  # names REDIS_SENTINEL_MASTER itself
    except BrokerUnreachable as ex:
        variable = bundle.redis.variable if bundle.redis is not None else "REDIS_URL"
        raise StorageError(f"{variable}: cannot connect: {ex}") from ex


def start_worker(broker: Broker, worker: Any, *, command: str) -> bool:
    """Start ``worker``; False, with both stopped, when its resources did not open.

    Dramatiq logs a failing boot hook and carries on; a worker without a
    database would only fail every message, so the command stops instead.
    """
    worker.start()
    if broker.resources is None or broker.resources.ready:
        return True
    print(f"{command}: could not open the database; see the log above.", file=sys.stderr)
    worker.stop(timeout=5_000)
    broker.bundle.broker.close()
    return False


def run_worker_process(settings: Settings, threads: int) -> int:
    """``ownsona worker``: consume every queue until SIGTERM or SIGINT; the exit status.

    Within SHUTDOWN_TIMEOUT running messages finish; prefetched ones, and any
    still running after it, go back to the queue for another worker.
    """
    if not settings.redis_configured:
        print(
            "ownsona worker needs REDIS_URL (or REDIS_SENTINELS); without it `ownsona serve` "
            "runs its own worker.",
            file=sys.stderr,
        )
        return 2
    tracing = start_tracing(settings, "worker")
    address = DatabaseAddress(settings)
    asyncio.run(address())  # a bad DATABASE_URL fails here, in plain words
    http = embedding_client(settings)  # the provider's calls, on the worker's loop
    embedder = make_embedder(settings, client=http)
    running = RunningMessages()
    actor_deps = ActorDeps(
        settings, address, embedder, owns_embedder=True, check_schema_first=True, http=http
    )
    broker = build_broker(
        settings,
        actor_deps=actor_deps,
        extra_middleware=[running],
        # Re-embedding batches to this worker's model come here too (`ownsona reembed`).
        reembed_queue_name=reembed_queue(embedder.provider, embedder.model),
    )
    require_broker(broker.bundle)
    worker = broker.worker(threads, timeout_ms=REDIS_WORKER_TIMEOUT_MS)
    stop = threading.Event()
    stop_on_signals(stop)
    if not start_worker(broker, worker, command="ownsona worker"):
        return 1
    print(f"OwnSona worker running ({threads} threads)", flush=True)
    # Said once, at start, as `ownsona serve` does: an unsealed store is not an error.
    for notice in actor_deps.notices:
        print(f"  {notice}", flush=True)
    stop.wait()
    stop_worker(worker, running, settings.shutdown_timeout_s)
    broker.bundle.broker.close()
    if tracing is not None:
        tracing.shutdown()
    return 0
