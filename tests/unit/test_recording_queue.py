"""The replicas' write queue answers /metrics and /readyz through the queue it wraps.

Before issue 35 it passed the web queue's protocol only through ``__getattr__``: a
method the protocol gained later was reached by accident or not at all.
"""

from __future__ import annotations

from typing import Any, cast

from bootstrap.recording_queue import RecordingWriteQueue
from storage.replicas import ReplicaSet


class _Queue:
    def __init__(self) -> None:
        self.ready_checks = 0

    async def submit(self, meta: Any, command: Any) -> dict[str, Any]:
        return {"ok": True}

    async def queue_depths(self) -> dict[str, int]:
        return {"ownsona-writes": 3}

    async def check_ready(self) -> None:
        self.ready_checks += 1
        if self.ready_checks > 1:
            raise ConnectionError("the queue's Redis is gone")


async def test_depths_and_readiness_are_the_wrapped_queues() -> None:
    inner = _Queue()
    queue = RecordingWriteQueue(inner, cast(ReplicaSet, object()))
    assert await queue.queue_depths() == {"ownsona-writes": 3}
    await queue.check_ready()
    try:
        await queue.check_ready()
    except ConnectionError as ex:
        assert "gone" in str(ex)
    else:
        raise AssertionError("a failed readiness check of the wrapped queue was swallowed")


def test_nothing_else_is_reached_through_attribute_fallback() -> None:
    queue = RecordingWriteQueue(_Queue(), cast(ReplicaSet, object()))
    assert not hasattr(queue, "ready_checks")
