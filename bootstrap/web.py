"""The web process: its collaborators built up front, opened and closed in order.

:class:`WebProcess` builds everything ``api.app.create_app`` receives
(Falcon asgilook style): a closed pool whose conninfo resolves the database
when it opens, the embedder, the key store and bearer check, the broker,
actors and write queue, and, without ``REDIS_URL``, the in-process worker.
Nothing connects while building; the local model loads and the embedding
settings are checked, so a bad ``EMBEDDING_*`` setting fails then, with the
other settings' errors and before the database is touched (before issue 13
it failed after the database had started). :meth:`WebProcess.open` then runs, in
this order: the database (embedded when DATABASE_URL is unset) and its
migrations, the pool, the login account and signing keys, the broker check,
the in-process worker, and the relation outbox's sweep; :meth:`close`
undoes whatever was opened, in reverse, and a failing step closes what came
before it. ``create_app(..., lifespan=web)`` has the ASGI lifespan call both.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable

import certifi

from api.runtime import Runtime
from auth.accounts import ensure_login_user
from auth.bearer import BearerValidator
from auth.keys import KeyStore
from auth.metadata_fetch import MetadataFetcher
from config.settings import Settings
from memory.audit import AuditLog
from memory.deps import Deps
from memory.handlers import dispatch
from memory.own_indexes import own_indexes_forever
from memory.recall.rerank import RerankStage
from memory.relations import sweep_forever
from storage.migrate import migrate
from tasks.actors import extraction_hook
from tasks.queue import DramatiqWriteQueue
from tasks.queue_guard import GuardedWriteQueue
from tasks.results import results_waiter

from .database import DatabaseAddress, open_pool, process_pool
from .providers import embedding_client, make_embedder, make_fact_extractor, make_rerank_stage
from .read_deadline import bounded_reads
from .read_routing import build_replicas, routed_runner
from .recording_queue import RecordingWriteQueue
from .sealing import build_keyring, open_keyring
from .tracing import start_tracing
from .worker import ActorDeps, build_broker, require_broker

_log = logging.getLogger(__name__)

#: Threads of the in-process worker (the embedded default).
IN_PROCESS_WORKER_THREADS = 4
#: Idle wait of the in-process worker's consumers, in milliseconds.
IN_PROCESS_WORKER_TIMEOUT_MS = 100
#: Seconds the in-process worker gets at shutdown, after uvicorn has drained
#: the requests (which wait for their writes): only background jobs remain.
IN_PROCESS_WORKER_STOP_S = 3
#: Seconds closing the web process may take after the drain (the worker's stop and the pools).
CLOSE_GRACE_S = IN_PROCESS_WORKER_STOP_S + 5

CloseHook = Callable[[], Awaitable[None]]


class WebProcess:
    """Everything one web process serves with; also the lifespan ``create_app`` runs.

    ``in_process_worker`` defaults to "no REDIS_URL": the embedded default runs
    its Dramatiq worker inside this process. Building is blocking (the local
    model loads here) and connects to nothing.
    """

    def __init__(
        self, settings: Settings, *, in_process_worker: bool | None = None, kind: str = "web"
    ) -> None:
        self.settings = settings
        # First, so the SQL of every pool built below is traced (when OTLP is configured).
        self._tracing = start_tracing(settings, kind)
        self._address = DatabaseAddress(settings)
        # A malformed master key fails here, with the other settings' errors.
        self.sealing = build_keyring(settings, self._address)
        # The embedding provider's client (unused by the local model); closed after the embedder.
        self._http = embedding_client(settings)
        self._embedder = make_embedder(settings, client=self._http)
        self._rerank = make_rerank_stage(settings)
        pool = process_pool(settings, self._address, name="web")
        run_worker = (
            (not settings.redis_configured) if in_process_worker is None else in_process_worker
        )
        self._broker = build_broker(
            settings,
            # The worker's event loop needs its own pool; the model is shared.
            actor_deps=ActorDeps(settings, self._address, self._embedder) if run_worker else None,
        )
        keystore = KeyStore(pool, access_token_ttl_s=settings.access_token_ttl_s)
        # How results are awaited follows from the broker (Redis, or in-process).
        self._queue = DramatiqWriteQueue(
            self._broker.bundle,
            self._broker.actors,
            timeout_s=settings.write_timeout_s,
            results=results_waiter(self._broker.bundle),
        )
        # Writes run on workers; the hook lets inline paths enqueue extraction too.
        deps = Deps(
            settings=settings,
            pool=pool,
            embedder=self._embedder,
            on_text_stored=extraction_hook(self._broker.actors),
            fact_extractor=make_fact_extractor(settings),
            reranker=self._rerank,
            keyring=self.sealing.keyring,
        )
        # DATABASE_REPLICA_URLS: reads on replicas, each write's WAL position recorded.
        self.replicas = build_replicas(settings, pool)
        # A queue failure is logged, and a retry whose first attempt committed is
        # answered from its receipt in PostgreSQL (tasks.queue_guard).
        guarded = GuardedWriteQueue(self._queue, deps)
        self.runtime = Runtime(
            settings=settings,
            deps=deps,
            write_queue=guarded
            if self.replicas is None
            else RecordingWriteQueue(guarded, self.replicas),
            keystore=keystore,
            replicas=self.replicas,
            # The read commands on a replica that has the caller's writes (or the primary),
            # each database wait within READ_TIMEOUT (a frozen server answers nothing).
            run_inline=routed_runner(
                bounded_reads(dispatch, settings.read_timeout_s), self.replicas
            ),
            bearer=BearerValidator(keystore, settings),
            metadata_fetcher=metadata_fetcher(settings),
            audit=AuditLog(pool, settings, keyring=self.sealing.keyring),
        )
        #: What opening did that an operator should hear about (e.g. a generated password).
        self.notices: list[str] = []
        self._close_hooks: list[CloseHook] = []

    async def open(self) -> None:
        """Open everything, in order; on failure, close what was opened and re-raise."""
        hooks = self._close_hooks
        deps = self.runtime.deps
        try:
            if self._http is not None:
                hooks.append(self._http.aclose)
            if self.runtime.metadata_fetcher is not None:
                hooks.append(self.runtime.metadata_fetcher.aclose)
            hooks.append(self._embedder.aclose)
            if self._rerank is not None:
                hooks.append(self._rerank.reranker.aclose)
            dsn = await self._address()
            dimensions = await self._embedder.ensure_ready()
            await migrate(dsn, dimensions=dimensions)
            # A wrong master key is refused here, before anything is served.
            await open_keyring(self.sealing, dsn)
            if self.sealing.keyring is not None:
                hooks.append(self.sealing.keyring.close)
            self.notices.extend(self.sealing.notices)
            await open_pool(deps.pool)
            hooks.append(deps.pool.close)
            if self.replicas is not None:
                # Refuses a replica that is a primary or another database; warns of a down one.
                for warning in await self.replicas.check(dsn):
                    _log.warning("%s", warning)
                await self.replicas.open()
                hooks.append(self.replicas.close)
            audit = self.runtime.audit
            if audit is not None:
                hooks.append(audit.close)  # writes what is buffered before the pool closes
            account = await ensure_login_user(deps.pool, self.settings)
            if account is not None and account.generated_password:
                self.notices.append(
                    f"Created login account {account.username!r} with generated password: "
                    f"{account.generated_password}"
                )
            await self.runtime.keystore.load()
            bundle = self._broker.bundle

            async def close_broker() -> None:
                await asyncio.to_thread(bundle.broker.close)

            # Hooks run in reverse: the worker below stops before its broker closes.
            hooks.append(close_broker)
            await asyncio.to_thread(require_broker, bundle)
            hooks.append(self._queue.aclose)
            if self._broker.resources is not None:
                await self._start_worker()
            # The relation outbox's sweep runs in every web process, in both shapes; with the
            # in-memory broker the first sweep sends every owed job (the last process's were lost).
            sweep = asyncio.create_task(
                sweep_forever(deps, everything_first=not self.settings.redis_configured)
            )
            # The background loops stop first (hooks run in reverse), before the worker,
            # broker and pool they use.
            hooks.append(_stopper(sweep))
            # Large users' own HNSW indexes (issue 16): one process at a time builds them.
            hooks.append(_stopper(asyncio.create_task(own_indexes_forever(deps.pool))))
            if self._rerank is not None:
                # In the background: start-up does not wait for a slow or absent reranker.
                hooks.append(_stopper(asyncio.create_task(_check_reranker(self._rerank))))
        except BaseException:
            await self.close()
            raise

    async def _start_worker(self) -> None:
        worker = self._broker.worker(
            IN_PROCESS_WORKER_THREADS, timeout_ms=IN_PROCESS_WORKER_TIMEOUT_MS
        )
        await asyncio.to_thread(worker.start)

        async def stop_worker() -> None:
            # Running messages finish (their requests were drained first); queued
            # ones are lost with the in-memory broker, and nobody awaits them.
            await asyncio.to_thread(worker.stop, IN_PROCESS_WORKER_STOP_S * 1000)

        self._close_hooks.append(stop_worker)

    async def close(self) -> None:
        """Close what :meth:`open` opened, last first; a failing step does not stop the rest."""
        hooks, self._close_hooks = self._close_hooks, []
        for hook in reversed(hooks):
            try:
                await hook()
            except Exception:  # closing must go on
                _log.exception("error while shutting down")
        if self._tracing is not None:
            # The last spans (this shutdown's) are exported before the process ends.
            await asyncio.to_thread(self._tracing.shutdown)
            self._tracing = None


async def _check_reranker(stage: RerankStage) -> None:
    failure = await stage.check()
    if failure is None:
        _log.info("the reranker answered")
    else:
        _log.warning("the reranker did not answer (%s): recall uses its first ranking", failure)


def metadata_fetcher(settings: Settings) -> MetadataFetcher:
    """The client-metadata fetcher: TLS verified against SSL_CERT_FILE, else certifi's bundle.

    Built explicitly rather than from httpx's environment handling, which
    would also pick up proxy variables (a proxy is not the address we check).
    """
    cafile = settings.ssl_cert_file or certifi.where()
    # Built on the first fetch: start-up loads no CA bundle for clients that never come.
    return MetadataFetcher(
        lambda: ssl.create_default_context(cafile=cafile),
        allow_loopback=settings.cimd_allow_loopback,
    )


def _stopper(task: asyncio.Task[None]) -> CloseHook:
    """A close hook that cancels a background loop and waits for it to end."""

    async def stop() -> None:
        # A cancellation that lands inside the loop's database work can be swallowed
        # there (seen when closing right after opening, as `ownsona stdio` does for an
        # unknown --user): cancel again until it ends.
        while not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=1)
        await asyncio.gather(task, return_exceptions=True)

    return stop
