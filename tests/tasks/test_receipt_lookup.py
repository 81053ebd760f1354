"""The receipt look-up a troubled write wait makes (issue 33) is bounded and never fails it.

While Redis fails over, the waiter asks PostgreSQL for the write's receipt
(``tasks.results.look_up_receipt``). A database that stalls or fails too must
not hold the write's answer nor turn it into an error: the waiter keeps
waiting on the queue, within the write's own deadline.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tasks.results import RECEIPT_LOOKUP_TIMEOUT_S, look_up_receipt


async def test_a_receipt_found_is_the_answer() -> None:
    async def found() -> dict[str, Any] | None:
        return {"ok": True, "memory_id": 7}

    assert await look_up_receipt(found) == {"ok": True, "memory_id": 7}


async def test_a_stalled_database_costs_the_wait_at_most_the_look_up_bound() -> None:
    cancelled = asyncio.Event()

    async def stalled() -> dict[str, Any] | None:
        try:
            await asyncio.Event().wait()  # a frozen primary: never answers
        finally:
            cancelled.set()
        return None

    started = time.monotonic()
    assert await look_up_receipt(stalled) is None
    assert time.monotonic() - started < RECEIPT_LOOKUP_TIMEOUT_S + 0.5
    await asyncio.wait_for(cancelled.wait(), 5)  # abandoned, not left running


async def test_a_failing_database_means_no_receipt_yet_not_an_error() -> None:
    async def failing() -> dict[str, Any] | None:
        raise OSError("connection refused")

    assert await look_up_receipt(failing) is None
    assert await look_up_receipt(None) is None
