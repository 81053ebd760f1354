"""Building and closing a web process's Runtime: the composition root of ``ownsona serve``.

Order matters: the database (embedded when DATABASE_URL is unset) and its
migrations, the pool, the embedder, the login account and signing keys, then
the broker: Redis with separate workers, or an in-process worker here.

Stopping is bounded (:class:`GracefulServer`): the first SIGINT or SIGTERM
lets uvicorn drain the requests for SHUTDOWN_TIMEOUT, then the runtime is
closed; whatever still runs SHUTDOWN_TIMEOUT + ``CLOSE_GRACE_S`` after the
signal is abandoned by exiting the process. A second Ctrl-C exits at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

import uvicorn

from auth.accounts import ensure_login_user
from auth.bearer import BearerValidator
from auth.keys import KeyStore
from bootstrap.providers import make_embedder, make_extractor
from config.settings import Settings
from memory.deps import Deps
from memory.providers.embedders import Embedder
from memory.relations import sweep_forever
from storage.embedded import start_embedded
from storage.errors import StorageError
from storage.migrate import migrate
from storage.pool import DatabaseUnreachable, check_reachable, make_pool
from tasks.actors import WorkerResources, declare_actors, extraction_hook
from tasks.broker import BrokerBundle, BrokerUnreachable, check_broker, make_broker
from tasks.queue import DramatiqWriteQueue

from .runtime import Runtime

_log = logging.getLogger(__name__)

#: Threads of the in-process worker (the embedded default).
IN_PROCESS_WORKER_THREADS = 4
#: Seconds the in-process worker gets at shutdown, after uvicorn has drained
#: the requests (which wait for their writes): only background jobs remain.
IN_PROCESS_WORKER_STOP_S = 3
#: Seconds closing the runtime may take after the drain (the worker's stop and the pools).
CLOSE_GRACE_S = IN_PROCESS_WORKER_STOP_S + 5
#: Exit code of a process stopped by a second Ctrl-C (the shell's code for SIGINT).
INTERRUPTED_EXIT_CODE = 130
#: Exit code when the shutdown deadline passed with something still running.
DEADLINE_EXIT_CODE = 1


async def resolve_database(settings: Settings) -> str:
    """DATABASE_URL (checked by connecting once), or the embedded cluster in OWNSONA_DATA_DIR.

    Raises StorageError naming DATABASE_URL when it cannot be used (address,
    credentials, ``sslmode``), instead of a pool retrying until its timeout.
    """
    if settings.database_url:
        try:
            await check_reachable(settings.database_url)
        except DatabaseUnreachable as ex:
            raise StorageError(f"DATABASE_URL: cannot connect: {ex}") from ex
        return settings.database_url
    # This process counts as a user of the cluster; the last one to exit stops it.
    return await asyncio.to_thread(functools.partial(start_embedded, settings.data_dir, hold=True))


def require_broker(settings: Settings, bundle: BrokerBundle) -> None:
    """Raise StorageError naming REDIS_URL when Redis does not answer (address, TLS, auth)."""
    try:
        check_broker(bundle)
    except BrokerUnreachable as ex:
        raise StorageError(f"REDIS_URL: cannot connect: {ex}") from ex


async def open_deps(settings: Settings, dsn: str, embedder: Embedder, *, name: str) -> Deps:
    pool = make_pool(dsn, min_size=settings.db_pool_min, max_size=settings.db_pool_max, name=name)
    await pool.open(wait=True, timeout=30)
    return Deps(settings=settings, pool=pool, embedder=embedder)


async def build_runtime(settings: Settings, *, in_process_worker: bool | None = None) -> Runtime:
    """Everything a web process needs; ``close_runtime`` undoes it.

    ``in_process_worker`` defaults to "no REDIS_URL": the embedded default runs
    its Dramatiq worker inside this process.
    """
    hooks: list[Any] = []
    try:
        dsn = await resolve_database(settings)
        embedder = await asyncio.to_thread(make_embedder, settings)
        hooks.append(embedder.aclose)
        dimensions = await embedder.ensure_ready()
        await migrate(dsn, dimensions=dimensions)
        deps = await open_deps(settings, dsn, embedder, name="web")
        hooks.append(deps.pool.close)
        notices: list[str] = []
        account = await ensure_login_user(deps.pool, settings)
        if account is not None and account.generated_password:
            notices.append(
                f"Created login account {account.username!r} with generated password: "
                f"{account.generated_password}"
            )
        keystore = KeyStore(deps.pool, access_token_ttl_s=settings.access_token_ttl_s)
        await keystore.load()

        run_worker = (not settings.redis_url) if in_process_worker is None else in_process_worker
        middleware = []
        if run_worker:

            async def build_worker_deps() -> Deps:
                # The worker's event loop needs its own pool; the model is shared.
                worker_deps = await open_deps(settings, dsn, embedder, name="worker")
                return dataclasses.replace(
                    worker_deps,
                    on_text_stored=extraction_hook(actors),
                    extractor=make_extractor(settings),
                )

            async def close_worker_deps(worker_deps: Deps) -> None:
                await worker_deps.pool.close()

            middleware.append(WorkerResources(build_worker_deps, close_worker_deps))
        bundle = make_broker(
            settings.redis_url,
            namespace=settings.queue_namespace,
            heartbeat_timeout_ms=settings.queue_heartbeat_timeout_ms,
            extra_middleware=middleware,
        )

        async def close_broker() -> None:
            await asyncio.to_thread(bundle.broker.close)

        # Closed last (hooks run in reverse): the worker below stops before its broker.
        hooks.append(close_broker)
        await asyncio.to_thread(require_broker, settings, bundle)
        actors = declare_actors(bundle.broker)
        # Writes run on workers; the hook lets inline paths enqueue extraction too.
        deps = dataclasses.replace(deps, on_text_stored=extraction_hook(actors))
        queue = DramatiqWriteQueue(bundle, actors, timeout_s=settings.write_timeout_s)
        hooks.append(queue.aclose)
        if run_worker:
            import dramatiq

            worker = dramatiq.Worker(
                bundle.broker, worker_threads=IN_PROCESS_WORKER_THREADS, worker_timeout=100
            )
            await asyncio.to_thread(worker.start)

            async def stop_worker() -> None:
                # Running messages finish (their requests were drained first); queued
                # ones are lost with the in-memory broker, and nobody awaits them.
                await asyncio.to_thread(worker.stop, IN_PROCESS_WORKER_STOP_S * 1000)

            hooks.append(stop_worker)
        # The relation outbox's sweep runs in every web process, in both shapes; with the
        # in-memory broker the first sweep sends every owed job (the last process's were lost).
        sweep = asyncio.create_task(sweep_forever(deps, everything_first=not settings.redis_url))

        async def stop_sweep() -> None:
            sweep.cancel()
            await asyncio.gather(sweep, return_exceptions=True)

        hooks.append(stop_sweep)  # stops first, before the worker, broker and pool it uses
        return Runtime(
            settings=settings,
            deps=deps,
            write_queue=queue,
            keystore=keystore,
            bearer=BearerValidator(keystore, settings),
            close_hooks=hooks,
            notices=notices,
        )
    except BaseException:
        await _run_hooks(hooks)
        raise


async def close_runtime(runtime: Runtime) -> None:
    await _run_hooks(runtime.close_hooks)
    runtime.close_hooks.clear()


async def _run_hooks(hooks: list[Any]) -> None:
    for hook in reversed(hooks):
        try:
            await hook()
        except Exception:  # closing must go on
            _log.exception("error while shutting down")


class GracefulServer(uvicorn.Server):
    """uvicorn's server with a shutdown that always ends, for ``ownsona serve``.

    uvicorn alone re-raises the stopping signal once it has drained: with
    SIGINT that cancelled ``close_runtime`` at its first await, so the
    in-process worker was never stopped and its (non-daemon) event loop
    thread kept the interpreter alive for good. Here:

    - the signal is not re-raised, and our handlers stay installed until
      the process ends, so the runtime is always closed;
    - the first signal arms a watchdog that exits the process (code 1)
      ``shutdown_timeout_s + CLOSE_GRACE_S`` later, whatever still runs;
    - a second SIGINT (Ctrl-C twice) exits at once with code 130, without
      a traceback. A second SIGTERM changes nothing: platforms may signal
      every process of a group, and one stop is enough.

    Exiting early never loses an acknowledged write: a request is answered
    only once its write has committed, and an unanswered request's write
    either committed (a retry with its idempotency key returns that answer)
    or rolls back with the connection.
    """

    def __init__(self, config: uvicorn.Config, *, shutdown_timeout_s: float) -> None:
        super().__init__(config)
        self._deadline_s = shutdown_timeout_s + CLOSE_GRACE_S
        self._stopping = False

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self.handle_exit)
        yield  # not restored: the process ends after closing, and a signal must not cancel that

    def handle_exit(self, sig: int, frame: Any) -> None:
        if not self._stopping:
            self._stopping = True
            self.should_exit = True
            watchdog = threading.Timer(
                self._deadline_s, _exit_after_deadline, args=(self._deadline_s,)
            )
            watchdog.daemon = True
            watchdog.start()
        elif sig == signal.SIGINT:
            _exit_now("interrupted again; exiting without waiting", INTERRUPTED_EXIT_CODE)


def _exit_after_deadline(deadline_s: float) -> None:
    _exit_now(f"shutdown did not finish within {deadline_s:g} s; exiting", DEADLINE_EXIT_CODE)


def _exit_now(message: str, code: int) -> None:
    # os._exit: no interpreter shutdown, which would wait for the worker's threads.
    try:
        sys.stderr.write(f"ownsona: {message}\n")
        sys.stderr.flush()
    finally:
        os._exit(code)
