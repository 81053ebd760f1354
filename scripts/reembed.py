"""``ownsona reembed``: move every memory to the configured embedding model (SUPPLEMENT §10).

The command plans the run (``memory.reembedding``), pages through the stale
ids and sends them, a batch per message, to the ``reembed_batch`` actor: on
the workers when ``REDIS_URL`` is set (those configured with the same model
consume the model's re-embedding queue), on an in-process worker otherwise.
It keeps batches in flight (one with the local model, which keeps every core
busy on its own; more for a remote provider or the workers), shows a progress
bar with rate and ETA on stderr, repeats passes until no row is stale,
finishes (for a new dimension: the staging column's HNSW index built in bulk,
then the swap), vacuums the table once (autovacuum is held off it meanwhile)
and prints a summary.
Interrupting it loses at most the batches in flight.
"""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass
from typing import Any, TextIO

from config.settings import Settings

#: Ids per batch message (one embedding call each).
DEFAULT_BATCH_SIZE = 256
#: Largest batch accepted (providers cap inputs per request; OpenAI's is 2048).
MAX_BATCH_SIZE = 2048
#: Batches in flight. In-process with the local model, one: the model already keeps
#: every core busy, and overlapping one batch's writes with the next one's embedding
#: measured slower on 2 cores (0.64-0.79 of the raw embedder's rate, against 0.83-0.85
#: one at a time with each batch written by two transactions, BENCHMARKS.md): the
#: model's threads wait for the one that shares its core with PostgreSQL. With a
#: remote embedding provider, two overlap its network wait with the writes. With
#: Redis, enough to keep a few workers busy.
LOCAL_IN_FLIGHT = 1
IN_PROCESS_IN_FLIGHT = 2
REDIS_IN_FLIGHT = 8
#: Longest wait for one batch's result, in seconds (a worker's time limit is 10 min).
BATCH_TIMEOUT_S = 11 * 60
#: Passes after the first before giving up on a store that keeps changing under us.
MAX_PASSES = 20


class ReembedError(Exception):
    """The run cannot go on; the message says why and what to do."""


@dataclass(frozen=True)
class Summary:
    done: int
    skipped: int
    seconds: float
    #: Rows still stale at the start (the dry run's answer).
    stale: int
    mode: str
    target: str
    #: How long the staging swap held the table (a dimension switch), in seconds.
    swap_seconds: float | None = None
    #: Of ``seconds``, the final vacuum of the rewritten rows.
    vacuum_seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        vacuum = f", the final vacuum {self.vacuum_seconds:.1f} s of it" if self.done else ""
        swap = (
            f"; the columns were swapped in {self.swap_seconds * 1000:.0f} ms"
            if self.swap_seconds is not None
            else ""
        )
        return (
            f"re-embedded {self.done} rows, skipped {self.skipped}, in {self.seconds:.1f} s "
            f"({self.rate:.1f} rows/s){vacuum}{swap}; the store is on the {self.target}"
        )


async def run(
    settings: Settings,
    *,
    dry_run: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
    in_flight: int | None = None,
    progress: TextIO | None = sys.stderr,
) -> Summary:
    """Re-embed every stale row (or, with ``dry_run``, count them and change nothing)."""
    from bootstrap.database import open_deps, resolve_database
    from bootstrap.providers import make_embedder
    from memory import reembedding
    from memory.audit import record_command

    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise ReembedError(f"--batch-size must be between 1 and {MAX_BATCH_SIZE}")
    from bootstrap.admin import check_schema, require_set_up

    dsn = await resolve_database(settings)
    await require_set_up(settings, dsn)  # one clear line, not a 30 s pool timeout
    embedder = await asyncio.to_thread(make_embedder, settings)
    try:
        await embedder.ensure_ready()
        deps = await open_deps(settings, dsn, embedder, name="reembed")
        try:
            async with deps.pool.connection() as conn:
                await check_schema(conn)
            if dry_run:
                plan = await reembedding.survey(deps)
                return Summary(0, 0, 0.0, plan.stale, plan.mode, plan.target.describe())
            summary = await _run(settings, dsn, deps, batch_size, in_flight, progress)
            if summary.done:
                # One audit record per account (the run does not sort rows by account).
                await record_command(
                    deps.pool,
                    settings,
                    "ownsona reembed",
                    None,
                    read_only=False,
                    duration_s=summary.seconds,
                )
            return summary
        finally:
            await deps.pool.close()
    finally:
        await embedder.aclose()


async def _run(
    settings: Settings,
    dsn: str,
    deps: Any,
    batch_size: int,
    in_flight: int | None,
    progress: TextIO | None,
) -> Summary:
    from tqdm import tqdm

    from memory import reembedding

    started = time.monotonic()
    plan = await reembedding.prepare(deps)
    dispatcher = _Dispatcher(settings, dsn, deps, in_flight)
    bar = tqdm(
        total=plan.stale,
        unit="row",
        desc="re-embedding",
        file=progress,
        disable=progress is None,
        smoothing=0.1,
    )
    done = skipped = 0
    swap_seconds: float | None = None
    indexed = False
    try:
        await reembedding.hold_autovacuum(deps)
        await dispatcher.start()
        for _ in range(MAX_PASSES + 1):
            async for ids in reembedding.stale_id_batches(deps, plan, batch_size):
                for result in await dispatcher.send(ids, plan.target.as_message()):
                    done, skipped = done + result["done"], skipped + result["skipped"]
                    bar.update(result["done"])
            for result in await dispatcher.drain():
                done, skipped = done + result["done"], skipped + result["skipped"]
                bar.update(result["done"])
            if plan.staged and not indexed:
                if progress is not None:
                    bar.clear()
                    print(
                        "building the new column's HNSW index (the server keeps serving)...",
                        file=progress,
                        flush=True,
                    )
                await reembedding.build_index(deps, plan)
                indexed = True
            finishing = time.monotonic()
            left = await reembedding.finish(deps, plan)
            if not left:
                if plan.staged:
                    swap_seconds = time.monotonic() - finishing
                break
            # Written or edited behind the pass (a server on the old model): another pass.
            bar.total = max(bar.total or 0, bar.n + left)
            bar.refresh()
        else:
            raise ReembedError(
                f"rows kept changing over {MAX_PASSES} passes; run `ownsona reembed` again"
            )
    finally:
        bar.close()
        await dispatcher.stop()
        await _resume_autovacuum(deps)
    vacuum_seconds = 0.0
    if done:
        vacuuming = time.monotonic()
        await reembedding.vacuum(deps)
        vacuum_seconds = time.monotonic() - vacuuming
    return Summary(
        done,
        skipped,
        time.monotonic() - started,
        plan.stale,
        plan.mode,
        plan.target.describe(),
        swap_seconds,
        vacuum_seconds,
    )


async def _resume_autovacuum(deps: Any) -> None:
    """Always, even when the run failed; a failure here must not hide the run's own."""
    from memory import reembedding

    try:
        await reembedding.resume_autovacuum(deps)
    except Exception:  # the database went away: the next run gives it back
        print(
            "ownsona reembed: could not turn autovacuum back on for the memories table; "
            "run `ownsona reembed` again (it does at the end)",
            file=sys.stderr,
            flush=True,
        )


class _Dispatcher:
    """Sends batches to the ``reembed_batch`` actor, keeping at most N in flight."""

    def __init__(self, settings: Settings, dsn: str, deps: Any, in_flight: int | None) -> None:
        self._settings = settings
        self._dsn = dsn
        self._deps = deps
        self._remote = settings.redis_configured
        if self._remote:
            default = REDIS_IN_FLIGHT
        elif deps.embedder.provider == "local":
            default = LOCAL_IN_FLIGHT
        else:
            default = IN_PROCESS_IN_FLIGHT
        self._limit = max(1, in_flight or default)
        self._pending: set[asyncio.Task[dict[str, Any]]] = set()
        self._bundle: Any = None
        self._actor: Any = None
        self._worker: Any = None

    async def start(self) -> None:
        from bootstrap.worker import ActorDeps, build_broker
        from tasks.actors import reembed_queue

        embedder = self._deps.embedder
        queue = reembed_queue(embedder.provider, embedder.model)
        # In process, a worker of its own; its event loop needs its own pool (the model is shared).
        actor_deps = (
            None
            if self._remote
            else ActorDeps(
                self._settings, self._dsn, embedder, name="reembed-worker", extraction=False
            )
        )
        broker = build_broker(self._settings, actor_deps=actor_deps, reembed_queue_name=queue)
        self._bundle = broker.bundle
        self._actor = broker.actors.reembed_batch
        if self._remote:
            print(
                f"sending batches to the workers on queue {queue!r} (workers started with these "
                "embedding settings; during a dimension switch: `ownsona worker --reembed-only`)",
                file=sys.stderr,
                flush=True,
            )
        else:
            self._worker = broker.worker(self._limit, timeout_ms=100)
            await asyncio.to_thread(self._worker.start)

    async def send(self, ids: list[int], target: dict[str, Any]) -> list[dict[str, Any]]:
        """Queue one batch; return the results of batches that finished to make room."""
        finished: list[dict[str, Any]] = []
        while len(self._pending) >= self._limit:
            finished.extend(await self._wait(asyncio.FIRST_COMPLETED))
        self._pending.add(asyncio.create_task(self._submit(ids, target)))
        return finished

    async def drain(self) -> list[dict[str, Any]]:
        return await self._wait(asyncio.ALL_COMPLETED) if self._pending else []

    async def _wait(self, when: str) -> list[dict[str, Any]]:
        done, self._pending = await asyncio.wait(self._pending, return_when=when)
        # Every failure retrieved (asyncio logs one that never is), the first one raised.
        failures = [ex for ex in (task.exception() for task in done) if ex is not None]
        if failures:
            raise failures[0]
        return [task.result() for task in done]

    async def _submit(self, ids: list[int], target: dict[str, Any]) -> dict[str, Any]:
        from dramatiq.results import ResultFailure, ResultTimeout

        message = self._actor.message(ids, target)
        backend = self._bundle.backend
        payload: dict[str, Any]  # the reembed_batch actor's answer
        try:
            if self._bundle.in_process:
                payload = await self._in_process(message, backend)
            else:
                await asyncio.to_thread(self._bundle.broker.enqueue, message)
                payload = await asyncio.to_thread(
                    backend.get_result, message, block=True, timeout=BATCH_TIMEOUT_S * 1000
                )
        except ResultTimeout:
            raise ReembedError(
                f"no worker finished a batch within {BATCH_TIMEOUT_S} s; are workers with these "
                f"embedding settings running (queue {message.queue_name!r})?"
            ) from None
        except ResultFailure as ex:
            raise ReembedError(f"a batch failed on the worker: {ex}") from ex
        if not payload.get("ok"):
            raise ReembedError(payload.get("error", {}).get("message", "a batch failed"))
        return payload

    async def _in_process(self, message: Any, backend: Any) -> Any:
        from dramatiq.results import ResultTimeout

        loop = asyncio.get_running_loop()
        landed = asyncio.Event()
        key = backend.build_message_key(message)

        def wake() -> None:
            loop.call_soon_threadsafe(landed.set)

        backend.add_waiter(key, wake)
        try:
            self._bundle.broker.enqueue(message)
            try:
                await asyncio.wait_for(landed.wait(), BATCH_TIMEOUT_S)
            except TimeoutError:
                raise ResultTimeout(message) from None  # type: ignore[no-untyped-call]  # dramatiq leaves this unannotated
        finally:
            backend.remove_waiter(key, wake)
        return backend.unwrap_result(backend.get_stored(key))

    async def stop(self) -> None:
        for task in self._pending:
            if task.done():
                if not task.cancelled():
                    task.exception()  # a batch that failed after the run stopped waiting
            else:
                task.cancel()
        self._pending.clear()
        if self._worker is not None:
            await asyncio.to_thread(self._worker.stop)
        if self._bundle is not None:
            await asyncio.to_thread(self._bundle.broker.close)


def serve_batches(settings: Settings, threads: int) -> int:
    """``ownsona reembed --worker``: consume only this model's re-embedding queue.

    During a dimension switch the ordinary workers keep the old model for the
    server's writes; these workers, started with the new model's settings,
    take the re-embedding batches and nothing else.
    """
    import signal
    import threading

    from bootstrap.database import DatabaseAddress
    from bootstrap.providers import make_embedder
    from bootstrap.worker import ActorDeps, build_broker, start_worker
    from tasks.actors import reembed_queue

    if not settings.redis_configured:
        print(
            "ownsona reembed --worker needs REDIS_URL (or REDIS_SENTINELS); without it "
            "`ownsona reembed` does the work itself.",
            file=sys.stderr,
        )
        return 2
    address = DatabaseAddress(settings)
    asyncio.run(address())
    embedder = make_embedder(settings)
    queue = reembed_queue(embedder.provider, embedder.model)
    actor_deps = ActorDeps(
        settings,
        address,
        embedder,
        name="reembed-worker",
        owns_embedder=True,
        check_schema_first=True,
        extraction=False,
    )
    broker = build_broker(settings, actor_deps=actor_deps, reembed_queue_name=queue)
    bundle = broker.bundle
    worker = broker.worker(max(1, threads), timeout_ms=1000, queues={queue})
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    if not start_worker(broker, worker, command="ownsona reembed --worker"):
        return 1
    print(f"OwnSona re-embedding worker running on queue {queue!r} ({threads} threads)", flush=True)
    stop.wait()
    # A batch in flight finishes (or is redelivered: batches are safe to repeat).
    worker.stop(timeout=25_000)
    bundle.broker.close()
    return 0


def main(settings: Settings, *, dry_run: bool, batch_size: int, in_flight: int | None) -> int:
    """The subcommand: run, print the summary (stdout), map failures to exit status 1."""
    from memory.errors import MemoryServiceError
    from storage.errors import StorageError

    try:
        summary = asyncio.run(
            run(settings, dry_run=dry_run, batch_size=batch_size, in_flight=in_flight)
        )
    except (ReembedError, StorageError) as ex:
        print(f"ownsona reembed: {ex}", file=sys.stderr)
        return 1
    except MemoryServiceError as ex:
        print(f"ownsona reembed: {ex.message}", file=sys.stderr)
        return 1
    if dry_run:
        how = (
            "in place"
            if summary.mode == "in_place"
            else "into a new vector column, swapped in at the end"
        )
        print(f"dry run: {summary.stale} rows to re-embed with the {summary.target}, {how}")
    else:
        print(summary.line(), flush=True)
    return 0


__all__ = ["DEFAULT_BATCH_SIZE", "ReembedError", "Summary", "main", "run", "serve_batches"]
