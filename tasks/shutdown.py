"""Stopping a Redis worker within the platform's grace period (SIGTERM, then SIGKILL).

Dramatiq's ``Worker.stop`` lets running messages finish and puts prefetched
ones back on their queue, but a message still running when the timeout ends
stays in this worker's unacknowledged set until another worker notices the
missing heartbeat (``QUEUE_HEARTBEAT_TIMEOUT``). :class:`RunningMessages`
tracks what is running so :func:`stop_worker` can hand those messages back
at once. Running one twice is safe: a write's receipt makes the rerun return
the first answer (``tasks.actors``).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import Any

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import Middleware

_log = logging.getLogger(__name__)

#: Exit code of a worker stopped by a second Ctrl-C (the shell's code for SIGINT).
INTERRUPTED_EXIT_CODE = 130


def stop_on_signals(stop: threading.Event) -> None:
    """SIGINT and SIGTERM set ``stop``; a second SIGINT (Ctrl-C twice) exits at once, quietly.

    A second SIGTERM changes nothing: a platform may signal every process
    of a group, and one graceful stop is enough.
    """

    def handle(sig: int, _frame: object) -> None:
        if stop.is_set() and sig == signal.SIGINT:
            sys.stderr.write("ownsona worker: interrupted again; exiting without waiting\n")
            sys.stderr.flush()
            os._exit(
                INTERRUPTED_EXIT_CODE
            )  # no interpreter shutdown waiting for the worker's threads
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handle)


class RunningMessages(Middleware):
    """The messages this process's worker threads are running right now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, Any] = {}

    def before_process_message(self, broker: dramatiq.Broker, message: Any) -> None:
        with self._lock:
            self._running[message.message_id] = message

    def after_process_message(
        self, broker: dramatiq.Broker, message: Any, *, result: Any = None, exception: Any = None
    ) -> None:
        with self._lock:
            self._running.pop(message.message_id, None)

    after_skip_message = after_process_message

    def snapshot(self) -> list[Any]:
        with self._lock:
            return list(self._running.values())


def stop_worker(worker: dramatiq.Worker, running: RunningMessages, timeout_s: float) -> int:
    """Stop ``worker``; requeue what is still running after ``timeout_s``; return that count.

    The caller exits the process right after: the threads still running
    are abandoned, and their database transactions roll back when the
    connections drop.
    """
    worker.stop(timeout=int(timeout_s * 1000))
    unfinished = running.snapshot()
    broker = worker.broker
    if not unfinished or not isinstance(broker, RedisBroker):
        return 0
    by_queue: dict[str, list[str]] = {}
    for message in unfinished:
        redis_id = message.options.get("redis_message_id")
        if redis_id is not None:
            by_queue.setdefault(message.queue_name, []).append(redis_id)
    for queue_name, ids in by_queue.items():
        # Dramatiq's own "requeue" command: out of this worker's unacked set, back on the queue.
        broker.do_requeue(queue_name, *ids)
    _log.warning(
        "shutdown: %d running message(s) did not finish within %g s; requeued for another worker",
        len(unfinished),
        timeout_s,
    )
    return len(unfinished)
