"""Thin actors: JSON in, a ``memory.handlers`` handler, a JSON payload out.

The worker side of a queued tool call: :func:`run_command` gets the call's
metadata and its command as JSON (``memory.calls.CallMeta``,
``memory.commands``), decodes them and runs the command's handler through
``memory.handlers.dispatch``. Domain errors come back as error payloads
(never retried: the answer would not change); a worker that dies mid-message
has it redelivered, and the use case's write receipt makes the rerun return
the first answer instead of writing again.

Across a rolling upgrade a worker also runs what the previous release's web
processes queue (``memory.calls``, "format"): ``run_use_case`` is the write
actor's name in c098406 and before, kept as an alias that reads those
messages (``tasks.legacy_messages``); a message in a format newer than this
worker reads is answered so, naming the reason, and nothing runs. Relation
extraction keeps its arguments ``(user_id, memory_ids[, request_id])``: the
request id of c098406's messages rides in the message options instead.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

import dramatiq
from dramatiq.asyncio import get_event_loop_thread
from dramatiq.middleware import AsyncIO

from memory.calls import COMMAND_FORMAT, OLDEST_READ_FORMAT, CallMeta, format_of
from memory.commands import COMMAND_KEY, Command, from_json
from memory.deps import Deps
from memory.errors import INTERNAL_ERROR, MemoryServiceError
from memory.handlers import dispatch
from memory.reembedding import reembed_batch as _reembed_batch
from memory.relations import extract_relations as _extract_relations
from memory.request_ids import accept_request_id, request_id_var

from .legacy_messages import LEGACY_WRITE_ACTOR, legacy_call

#: The queue every tool write goes through.
WRITE_QUEUE = "ownsona-writes"
#: Longest a single write may run on a worker, in milliseconds.
WRITE_TIME_LIMIT_MS = 10 * 60 * 1000
#: The queue of fire-and-forget background jobs (relation extraction).
BACKGROUND_QUEUE = "ownsona-background"
#: Attempts after the first before an extraction is given up (then logged).
EXTRACTION_MAX_RETRIES = 8
#: Back-off before the first retry, doubling each time (Dramatiq adds jitter), in milliseconds.
EXTRACTION_MIN_BACKOFF_MS = 5_000
#: Longest back-off between retries, in milliseconds.
EXTRACTION_MAX_BACKOFF_MS = 10 * 60 * 1000
#: Memory ids per extraction message.
EXTRACTION_CHUNK = 25
#: Longest one extraction message may run (LLM calls included), in milliseconds.
EXTRACTION_TIME_LIMIT_MS = 15 * 60 * 1000
#: Longest one re-embedding batch may run (a slow provider included), in milliseconds.
REEMBED_TIME_LIMIT_MS = 10 * 60 * 1000
#: Attempts after the first for a re-embedding batch that failed unexpectedly.
REEMBED_MAX_RETRIES = 3


def reembed_queue(provider: str, model: str) -> str:
    """The queue of re-embedding batches to this model (SUPPLEMENT §10).

    One queue per model: only workers configured with that model consume it,
    so workers still serving the old model during a switch never take one.
    """
    digest = hashlib.sha256(f"{provider}\0{model}".encode()).hexdigest()[:12]
    return f"ownsona-reembed-{digest}"


_log = logging.getLogger(__name__)

#: The message option naming the format of a background job's arguments.
FORMAT_OPTION = "command_format"


class NewerFormat(Exception):
    """A background job of a later release's format: retried (with back-off), never misread."""


#: The options of the message this worker thread is running (set by :class:`WorkerResources`;
#: the actor's coroutine inherits it): where a format-0 write carries its request id and writer.
_running_options: ContextVar[Mapping[str, Any]] = ContextVar(
    "ownsona_message_options", default=MappingProxyType({})
)


class DepsSource(Protocol):
    """Where an actor gets the Deps of the worker it runs on (:class:`WorkerResources`)."""

    def deps(self) -> Deps:
        """The open Deps; raises RuntimeError when the worker's resources are not open."""
        ...


class _NoWorker:
    """The source of a broker that only sends (a web process with separate workers)."""

    def deps(self) -> Deps:
        raise RuntimeError("worker resources are not open: this broker has no WorkerResources")


async def run_command(
    source: DepsSource, meta: dict[str, Any], command: dict[str, Any]
) -> dict[str, Any]:
    """Run one queued command: ``meta`` and ``command`` as the API encoded them."""
    deps = source.deps()
    try:
        sent_format = format_of(meta)
    except (AttributeError, ValueError):
        sent_format = None
    if sent_format is not None and sent_format > COMMAND_FORMAT:
        return _newer_format(sent_format).to_payload()
    try:
        decoded = from_json(command)
        call = CallMeta.from_json(meta)
    except (AttributeError, KeyError, TypeError, ValueError):
        _log.error(
            "a queued command could not be decoded: %r (format %r)",
            command.get(COMMAND_KEY) if isinstance(command, dict) else None,
            sent_format,
        )
        return _unreadable().to_payload()
    return await _run(deps, call, decoded)


async def run_use_case(
    source: DepsSource,
    tool: str,
    user_id: int,
    args: Any,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    """Run a write a web process of c098406 or before queued (command format 0).

    The message options (its request id and writer) are read from the
    message being processed, which :class:`WorkerResources` keeps per thread.
    """
    deps = source.deps()
    options = _running_options.get()
    try:
        call, decoded = legacy_call(tool, user_id, args, idempotency_key, options, deps.settings)
    except MemoryServiceError as ex:
        return ex.to_payload()
    except (AttributeError, KeyError, TypeError, ValueError):
        _log.error("a queued format-0 write could not be decoded: %r", tool)
        return _unreadable().to_payload()
    return await _run(deps, call, decoded)


async def _run(deps: Deps, call: CallMeta, decoded: Command) -> dict[str, Any]:
    try:
        return await dispatch(deps, call, decoded)
    except MemoryServiceError as ex:
        # The worker's one error boundary: the API passes this payload on as it is.
        return ex.to_payload()
    except Exception:
        # Never the arguments: they hold memory text.
        _log.exception("command %s failed unexpectedly", type(decoded).__name__)
        return MemoryServiceError(
            INTERNAL_ERROR, "An unexpected error occurred; nothing was changed."
        ).to_payload()


def _newer_format(sent: int) -> MemoryServiceError:
    """The answer to a message of a later release: this worker must not guess at it."""
    _log.error(
        "a queued command is in format %d, newer than this worker reads (%d to %d): "
        "upgrade the workers before the web processes",
        sent,
        OLDEST_READ_FORMAT,
        COMMAND_FORMAT,
        extra={"command_format": sent},
    )
    return MemoryServiceError(
        INTERNAL_ERROR,
        "This write reached a worker of an older OwnSona release, which cannot read it, so "
        "nothing was stored. Try again once the workers are upgraded: repeating the same call "
        "is safe.",
        {"component": "worker", "command_format": sent, "worker_reads": COMMAND_FORMAT},
    )


def _unreadable() -> MemoryServiceError:
    return MemoryServiceError(
        INTERNAL_ERROR,
        "The worker could not read this queued write, so nothing was stored.",
        {"component": "worker"},
    )


async def extract_relations(
    source: DepsSource, user_id: int, memory_ids: list[int], request_id: str | None = None
) -> None:
    """Re-extract these memories' relation edges (SUPPLEMENT §6); raises to be retried.

    A retry redoes the whole chunk: extraction replaces a memory's edges, so
    doing one twice changes nothing. ``request_id`` is the write's that owed
    it, for log lines only (:class:`WorkerResources` sets it as the logging
    context); c098406 sent it in the message options and two arguments, which
    this signature also takes.

    The message's ``command_format`` option (none before this release: 1)
    names the format of its arguments. A newer one raises here, so the job
    is retried with back-off and meets a worker of its release later, rather
    than being run on arguments this worker would misread.
    """
    sent = _running_options.get().get(FORMAT_OPTION, 1)
    if isinstance(sent, int) and sent > COMMAND_FORMAT:
        raise NewerFormat(
            f"an extraction job in format {sent}, newer than this worker reads "
            f"({COMMAND_FORMAT}): retried later; upgrade the workers before the web processes"
        )
    deps = source.deps()
    for memory_id in memory_ids:
        await _extract_relations(deps, user_id, memory_id)


async def reembed_batch(
    source: DepsSource, ids: list[int], target: dict[str, Any]
) -> dict[str, Any]:
    """Re-embed one batch of memory ids with this worker's model; an error payload on refusal."""
    deps = source.deps()
    try:
        return await _reembed_batch(deps, ids, target)
    except MemoryServiceError as ex:
        return ex.to_payload()


@dataclass(frozen=True)
class Actors:
    run_command: dramatiq.Actor[..., Any]
    #: The write actor under its c098406 name: reads format-0 messages (never sent now).
    run_use_case: dramatiq.Actor[..., Any]
    extract_relations: dramatiq.Actor[..., Any]
    reembed_batch: dramatiq.Actor[..., Any]


def declare_actors(
    broker: dramatiq.Broker,
    *,
    extraction_min_backoff_ms: int = EXTRACTION_MIN_BACKOFF_MS,
    extraction_max_backoff_ms: int = EXTRACTION_MAX_BACKOFF_MS,
    extraction_max_retries: int = EXTRACTION_MAX_RETRIES,
    reembed_queue_name: str = "ownsona-reembed",
) -> Actors:
    """Declare the actors on ``broker``; ``reembed_queue_name`` comes from :func:`reembed_queue`.

    The actors take their Deps from the broker's :class:`WorkerResources`
    (this process's worker); a broker without one only sends messages.
    """
    source: DepsSource = next(
        (m for m in broker.middleware if isinstance(m, WorkerResources)), _NoWorker()
    )
    write_options = {"max_retries": 0, "store_results": True, "time_limit": WRITE_TIME_LIMIT_MS}
    return Actors(
        run_command=dramatiq.Actor(
            _bound(run_command, source),
            broker=broker,
            actor_name="run_command",
            queue_name=WRITE_QUEUE,
            priority=0,
            options=write_options,
        ),
        # Same queue and options: a web process of the previous release waits on its result.
        run_use_case=dramatiq.Actor(
            _bound(run_use_case, source),
            broker=broker,
            actor_name=LEGACY_WRITE_ACTOR,
            queue_name=WRITE_QUEUE,
            priority=0,
            options=dict(write_options),
        ),
        # Fire and forget: no result is stored, failures are retried with back-off,
        # and a lower priority keeps it behind tool writes on a shared worker.
        extract_relations=dramatiq.Actor(
            _bound(extract_relations, source),
            broker=broker,
            actor_name="extract_relations",
            queue_name=BACKGROUND_QUEUE,
            priority=10,
            options={
                "max_retries": extraction_max_retries,
                "min_backoff": extraction_min_backoff_ms,
                "max_backoff": extraction_max_backoff_ms,
                "time_limit": EXTRACTION_TIME_LIMIT_MS,
                "store_results": False,
            },
        ),
        # Operator jobs: `ownsona reembed` awaits each result; a batch is safe to repeat.
        reembed_batch=dramatiq.Actor(
            _bound(reembed_batch, source),
            broker=broker,
            actor_name="reembed_batch",
            queue_name=reembed_queue_name,
            priority=20,
            options={
                "max_retries": REEMBED_MAX_RETRIES,
                "min_backoff": 1_000,
                "max_backoff": 30_000,
                "time_limit": REEMBED_TIME_LIMIT_MS,
                "store_results": True,
            },
        ),
    )


def _bound(fn: Callable[..., Awaitable[Any]], source: DepsSource) -> Callable[..., Awaitable[Any]]:
    """``fn`` with its Deps source bound, keeping its name and module (Dramatiq's logger uses them)."""

    @functools.wraps(fn)
    async def actor(*args: Any, **kwargs: Any) -> Any:
        return await fn(source, *args, **kwargs)

    return actor


def extraction_hook(actors: Actors) -> Callable[[int, list[int]], None]:
    """The ``Deps.on_text_stored`` hook: one extraction message per memory id."""

    def send(user_id: int, memory_ids: list[int]) -> None:
        # A few messages per batch rather than one per memory: a 200-item
        # remember_batch costs 8 enqueues, and a failed chunk retries alone.
        # The logging context's request id (the write's, on a worker or in the web
        # process; none in the outbox sweep) goes along as an argument, so the
        # extraction's log lines carry it too.
        request_id = request_id_var.get()
        for start in range(0, len(memory_ids), EXTRACTION_CHUNK):
            chunk = memory_ids[start : start + EXTRACTION_CHUNK]
            # The format in the options, not the arguments: a worker of the previous
            # release (which reads three arguments) runs it as it is.
            options: dict[str, Any] = {FORMAT_OPTION: COMMAND_FORMAT}
            actors.extract_relations.send_with_options(args=(user_id, chunk, request_id), **options)

    return send


class WorkerResources(AsyncIO):
    """Dramatiq's AsyncIO middleware plus this worker's resources on its event loop.

    The pool (and hooks) open on the actors' event loop before consuming
    starts, and close only after the worker threads have finished their
    messages, before the loop stops: a message in flight at shutdown never
    finds its pool closed. ``build`` is an async callable returning Deps;
    ``close`` releases them. The actors :func:`declare_actors` puts on the
    same broker get their Deps from here (:meth:`deps`).
    """

    def __init__(
        self,
        build: Callable[[], Awaitable[Deps]],
        close: Callable[[Deps], Awaitable[None]],
    ) -> None:
        super().__init__()
        self._build = build
        self._close = close
        self._deps: Deps | None = None
        self._running = threading.local()

    @property
    def ready(self) -> bool:
        """True once the resources are open (the worker's boot succeeded)."""
        return self._deps is not None

    def deps(self) -> Deps:
        if self._deps is None:
            raise RuntimeError("worker resources are not open")
        return self._deps

    def before_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        # Starts the event loop thread.
        super().before_worker_boot(broker, worker)  # type: ignore[no-untyped-call]  # dramatiq leaves this unannotated
        loop_thread = get_event_loop_thread()
        assert loop_thread is not None
        self._deps = loop_thread.run_coroutine(self._build())

    def after_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        loop_thread = get_event_loop_thread()
        deps, self._deps = self._deps, None
        if deps is not None and loop_thread is not None:
            loop_thread.run_coroutine(self._close(deps))
        super().after_worker_shutdown(broker, worker)  # type: ignore[no-untyped-call]  # dramatiq leaves this unannotated

    # Each worker thread runs one message at a time: the request id its
    # arguments carry (a command's CallMeta, an extraction's request id) is this
    # thread's logging context while it runs (self._running, per thread), and
    # the actor's coroutine inherits it (asyncio copies the context it is sent
    # from). Log lines only: the handler gets the request id in its CallMeta.

    def before_process_message(self, broker: dramatiq.Broker, message: Any) -> None:
        self._running.request_id = request_id_var.set(_request_id_of(message))
        options = message.options if isinstance(message.options, Mapping) else {}
        self._running.options = _running_options.set(MappingProxyType(dict(options)))
        self._running.started = time.perf_counter()

    def after_process_message(
        self, broker: dramatiq.Broker, message: Any, *, result: Any = None, exception: Any = None
    ) -> None:
        started = getattr(self._running, "started", None)
        if started is not None:
            _log_processed(message, result, exception, time.perf_counter() - started)
        token, self._running.request_id, self._running.started = (
            getattr(self._running, "request_id", None),
            None,
            None,
        )
        if token is not None:
            request_id_var.reset(token)
        options_token, self._running.options = getattr(self._running, "options", None), None
        if options_token is not None:
            _running_options.reset(options_token)

    after_skip_message = after_process_message


def _request_id_of(message: Any) -> str | None:
    """The request id a message carries (for its log lines), or None.

    In a command's meta (format 1), in an extraction's third argument
    (6540e3c on), or in the message options (format 0 and c098406's extractions).
    """
    args = message.args
    if message.actor_name == "run_command" and args and isinstance(args[0], dict):
        value = args[0].get("request_id")
    elif message.actor_name == "extract_relations" and len(args) > 2:
        value = args[2]
    else:
        value = message.options.get("request_id") if isinstance(message.options, dict) else None
    return accept_request_id(value) if isinstance(value, str) else None


def _log_processed(message: Any, result: Any, exception: Any, seconds: float) -> None:
    """One line per message: the actor, the command and outcome; never the arguments."""
    fields: dict[str, Any] = {"actor": message.actor_name, "duration_ms": round(seconds * 1000, 2)}
    if message.actor_name == "run_command" and len(message.args) > 1:
        command = message.args[1]
        if isinstance(command, dict) and isinstance(command.get(COMMAND_KEY), str):
            fields["use_case"] = command[COMMAND_KEY]
    elif (
        message.actor_name == LEGACY_WRITE_ACTOR
        and message.args
        and isinstance(message.args[0], str)
    ):
        fields["use_case"] = message.args[0][:64]
    if exception is not None:
        fields["outcome"] = type(exception).__name__
    elif isinstance(result, dict) and "ok" in result:
        fields["outcome"] = "ok" if result["ok"] else (result.get("error") or {}).get("code")
    what = f"{fields['actor']} {fields['use_case']}" if "use_case" in fields else fields["actor"]
    _log.info("processed %s %.1fms", what, seconds * 1000, extra=fields)
