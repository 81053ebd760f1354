"""The API side of a queued command: send the message, await its result without blocking.

The result is the worker's payload, passed on as it is: a domain error was
turned into its payload once, on the worker; only the queue's own failures
(unreachable, no answer in time) are raised here, for ``api/errors.py``.
How a result is awaited is the :class:`~tasks.results.ResultsWaiter`'s
business (Redis or in-process), chosen by the composition root.
"""

from __future__ import annotations

from typing import Any

from dramatiq.results import ResultFailure

from memory.calls import CallMeta
from memory.commands import Command
from memory.errors import INTERNAL_ERROR, MemoryServiceError

from .actors import Actors
from .broker import BrokerBundle
from .results import (
    ReceiptLookup,
    ResultsWaiter,
    Settled,
    queue_unreachable,
    results_waiter,
    write_timed_out,
)

__all__ = ["DramatiqWriteQueue", "queue_unreachable", "write_timed_out"]


class DramatiqWriteQueue:
    """Implements ``api.runtime.WriteQueue`` over a :class:`BrokerBundle`."""

    def __init__(
        self,
        bundle: BrokerBundle,
        actors: Actors,
        *,
        timeout_s: float,
        results: ResultsWaiter | None = None,
    ) -> None:
        self._bundle = bundle
        self._actor = actors.run_command
        self._timeout_s = timeout_s
        self._results = results if results is not None else results_waiter(bundle)

    async def submit(
        self, meta: CallMeta, command: Command, *, receipt: ReceiptLookup | None = None
    ) -> dict[str, Any]:
        """Run ``command`` on a worker and return its payload, ``{"ok": false}`` ones included.

        ``receipt`` looks the write's receipt up in PostgreSQL: once the wait for the
        result meets a broken or stalled Redis connection, a receipt found is the answer
        (:class:`~tasks.results.Settled`; issue 33).

        The message's arguments are the call's metadata and the command, each as
        JSON (:meth:`CallMeta.to_json`, :meth:`Command.to_json`: tagged by the
        command's type). Raises MemoryServiceError only when the queue itself
        fails: unreachable, no result in time.
        """
        message = self._actor.message(meta.to_json(), command.to_json())
        data = await self._results.send_and_wait(message, self._timeout_s, receipt=receipt)
        if isinstance(data, Settled):
            return data.payload  # the write's committed first answer
        try:
            payload: dict[str, Any] = self._bundle.backend.unwrap_result(data)
        except ResultFailure as ex:
            raise MemoryServiceError(INTERNAL_ERROR, "An unexpected error occurred.") from ex
        # An error payload is the worker's answer (tasks.actors built it): passed on as it is.
        return payload

    async def queue_depths(self) -> dict[str, int]:
        """Messages enqueued and not yet acknowledged, per declared queue (metrics).

        On Redis: waiting, prefetched by a worker, or running, delay queues
        included. In-process: the messages still waiting.
        """
        return await self._results.queue_depths()

    async def check_ready(self) -> None:
        """Return when a write sent now would be queued; raise why not (``/readyz``)."""
        await self._results.check_ready()

    async def aclose(self) -> None:
        await self._results.aclose()
