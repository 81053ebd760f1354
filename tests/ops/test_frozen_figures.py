"""The drill's figures of writes issued while a node was frozen (issue 33's targets).

The full drill reports them; a wrong window or a wrong clock would hide the
wait issue 33 measured (writes answered 22 s into a Sentinel failover).
"""

from __future__ import annotations

import math

from scripts.cluster.clients import Ack, Call
from scripts.cluster.frozen_figures import describe, frozen_write_figures

FROZEN_AT, FAILED_OVER_AT, THAWED_AT = 100.0, 103.0, 110.0


def _write(started: float, seconds: float, outcome: str = "ok") -> Call:
    return Call(web=0, tool="remember", started=started, seconds=seconds, outcome=outcome)


def test_only_writes_in_flight_while_frozen_count_and_the_slowest_answer_shows() -> None:
    calls = [
        _write(98.0, 1.5),  # answered before the freeze: not this figure's
        _write(99.0, 22.0),  # sent just before the freeze, left waiting on the frozen master
        _write(100.5, 20.0),
        _write(101.0, 2.0, "DATABASE_ERROR"),
        _write(104.0, 1.0),
        _write(105.0, 40.0, "hang"),
        Call(web=1, tool="get_memory", started=102.0, seconds=50.0, outcome="ok"),
        _write(111.0, 0.1),  # after the thaw
    ]
    figures = frozen_write_figures(calls, [], FROZEN_AT, THAWED_AT)

    assert (figures["calls"], figures["calls_ok"]) == (5, 3)
    assert (figures["calls_refused"], figures["calls_hung"]) == (1, 1)
    assert figures["answer_max_ms"] == 22000.0
    assert figures["answer_p99_ms"] == 22000.0
    assert "failed_over_s" not in figures


def test_a_write_retried_through_the_freeze_counts_its_whole_wait() -> None:
    acks = [
        Ack(user=1, memory_id=7, text="a", web=0, at=112.0, asked_at=101.0),
        Ack(user=2, memory_id=8, text="b", web=0, at=99.5, asked_at=99.0),  # before
        Ack(user=3, memory_id=9, text="c", web=0, at=111.0, asked_at=110.5),  # after
    ]
    figures = frozen_write_figures([], acks, FROZEN_AT, THAWED_AT)

    assert figures["writes_acknowledged"] == 1
    assert figures["acknowledged_max_ms"] == 11000.0
    assert math.isnan(figures["answer_max_ms"])


def test_answers_are_placed_against_the_failover() -> None:
    calls = [_write(101.0, 21.0), _write(104.0, 0.5)]
    figures = frozen_write_figures(calls, [], FROZEN_AT, THAWED_AT, FAILED_OVER_AT)

    assert figures["failed_over_s"] == 3.0
    assert figures["last_answer_after_failover_s"] == 19.0
    assert figures["answer_max_issued_before_failover_ms"] == 21000.0
    assert any("19.0 s after it" in line for line in describe(figures))
