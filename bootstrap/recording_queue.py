"""The web process's write queue with read replicas: each acknowledged write's WAL position
is recorded for its user before the answer leaves (issue 29), so that user's next read goes
to a replica that has replayed it, or to the primary.

When the position cannot be read, the user is pinned to the primary for
``position_ttl_s`` (a pin is not renewed by later writes: issue 33, finding 6). When Redis
failed a moment ago, the position waits in this process (:mod:`bootstrap.write_positions`).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from memory.calls import CallMeta
from memory.commands import Command
from storage.replicas import ReplicaSet

from .write_positions import PositionsSkipped

_log = logging.getLogger(__name__)


class WebWriteQueue(Protocol):
    """What the web process asks of its write queue: writes, /metrics, /readyz."""

    async def submit(self, meta: CallMeta, command: Command) -> dict[str, Any]: ...

    async def queue_depths(self) -> dict[str, int]: ...

    async def check_ready(self) -> None: ...


class RecordingWriteQueue:
    """A write queue that records each acknowledged write's WAL position for its user."""

    def __init__(self, queue: WebWriteQueue, replicas: ReplicaSet) -> None:
        self._queue = queue
        self._replicas = replicas

    async def submit(self, meta: CallMeta, command: Command) -> dict[str, Any]:
        payload = await self._queue.submit(meta, command)
        user_id = meta.user_id
        try:
            await self._replicas.wrote(user_id)
        except PositionsSkipped:
            # Redis failed a moment ago: the position waits in this process (its reads
            # go to the primary meanwhile) and reaches Redis when it answers again.
            pass
        except Exception as ex:
            # The write has committed; without its position the user reads from the
            # primary, for position_ttl_s (by then any replica serving reads has it).
            _log.warning("could not record a write's WAL position (%s)", type(ex).__name__)
            try:
                await self._replicas.positions.pin(user_id, self._replicas.position_ttl_s)
            except PositionsSkipped:
                pass
            except Exception as again:
                _log.error(
                    "could not route the user's reads to the primary either (%s): they may "
                    "miss this write on a replica until it replays it",
                    type(again).__name__,
                )
        return payload

    async def queue_depths(self) -> dict[str, int]:
        """The wrapped queue's depths (/metrics): recording adds no queue of its own."""
        return await self._queue.queue_depths()

    async def check_ready(self) -> None:
        """The wrapped queue's readiness (/readyz)."""
        await self._queue.check_ready()
