"""Thin actors: ids and JSON in, a ``memory.service`` use case, a JSON payload out.

The worker side of a tool call. Domain errors come back as error payloads
(never retried: the answer would not change); a worker that dies mid-message
has it redelivered, and the use case's write receipt makes the rerun return
the first answer instead of writing again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import dramatiq
from dramatiq.middleware import Middleware

from memory.deps import Deps
from memory.errors import INTERNAL_ERROR, MemoryServiceError
from memory.service import USE_CASES

#: The queue every tool write goes through.
WRITE_QUEUE = "ownsona-writes"
#: Longest a single write may run on a worker, in milliseconds.
WRITE_TIME_LIMIT_MS = 10 * 60 * 1000

_log = logging.getLogger(__name__)


class _WorkerState:
    """The collaborators of this worker process, set up on its event loop at boot."""

    deps: Deps | None = None


_state = _WorkerState()


async def run_use_case(use_case: str, user_id: int, args: dict[str, Any], idempotency_key: str) -> dict[str, Any]:
    deps = _state.deps
    if deps is None:
        raise RuntimeError("worker resources are not open")
    fn = USE_CASES.get(use_case)
    if fn is None:
        return MemoryServiceError(INTERNAL_ERROR, "Unknown operation.").to_payload()
    try:
        return await fn(deps, user_id, args, idempotency_key=idempotency_key)
    except MemoryServiceError as ex:
        return ex.to_payload()
    except Exception:
        # Never the arguments: they hold memory text.
        _log.exception("write %s failed unexpectedly", use_case)
        return MemoryServiceError(INTERNAL_ERROR, "An unexpected error occurred; nothing was changed.").to_payload()


@dataclass(frozen=True)
class Actors:
    run_use_case: dramatiq.Actor


def declare_actors(broker: dramatiq.Broker) -> Actors:
    return Actors(
        run_use_case=dramatiq.Actor(
            run_use_case,
            broker=broker,
            actor_name="run_use_case",
            queue_name=WRITE_QUEUE,
            priority=0,
            options={"max_retries": 0, "store_results": True, "time_limit": WRITE_TIME_LIMIT_MS},
        )
    )


class WorkerResources(Middleware):
    """Opens the worker's pool (and embedder) on its event loop at boot, closes at shutdown.

    ``build`` is an async callable returning Deps; ``close`` releases them.
    """

    def __init__(self, build: Any, close: Any) -> None:
        self._build = build
        self._close = close

    def after_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        from dramatiq.asyncio import get_event_loop_thread

        loop_thread = get_event_loop_thread()
        assert loop_thread is not None, "the AsyncIO middleware must come first"
        _state.deps = loop_thread.run_coroutine(self._build())

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        from dramatiq.asyncio import get_event_loop_thread

        loop_thread = get_event_loop_thread()
        deps, _state.deps = _state.deps, None
        if deps is not None and loop_thread is not None:
            loop_thread.run_coroutine(self._close(deps))
