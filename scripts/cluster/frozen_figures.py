"""What the writes issued while a node was frozen cost their clients (issue 33's figures).

A write "during the freeze" is a ``remember`` call in flight while the node
was frozen: started before the SIGCONT, not answered before the SIGSTOP. A
call sent just before the freeze counts: it is the one left waiting on the
frozen node. Two views of those writes:

- each call: how long until it was answered (acknowledged or refused), p50 /
  p99 / max; the target for a Redis master frozen through a Sentinel failover
  is every answer within 10 s (6540e3c: 22 s, the web processes waited on the
  frozen old master until their read timeout);
- each write a client was trying to store then: how long from its first try
  until it was acknowledged, its retries included (what the user waited).

For ``redis-split`` also when those calls were answered relative to the
failover (every Sentinel naming the replica): the last answer's seconds after
it, and the longest wait of a call sent before it.
"""

from __future__ import annotations

import math

from .clients import Ack, Call


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _spread(prefix: str, seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {
        f"{prefix}_p50_ms": _pct(ms, 0.5),
        f"{prefix}_p99_ms": _pct(ms, 0.99),
        f"{prefix}_max_ms": max(ms, default=float("nan")),
    }


def frozen_write_figures(
    calls: list[Call],
    acks: list[Ack],
    frozen_at: float,
    thawed_at: float,
    failed_over_at: float | None = None,
) -> dict[str, float]:
    """The figures of the writes in flight between ``frozen_at`` and ``thawed_at``."""
    during = [
        c
        for c in calls
        if c.tool == "remember" and c.started <= thawed_at and c.started + c.seconds >= frozen_at
    ]
    answered = [c for c in during if c.outcome != "hang"]
    figures: dict[str, float] = {
        "calls": len(during),
        "calls_ok": sum(c.outcome == "ok" for c in during),
        "calls_refused": sum(c.outcome not in ("ok", "hang") for c in during),
        "calls_hung": len(during) - len(answered),
        **_spread("answer", [c.seconds for c in answered]),
    }
    asked = [a for a in acks if a.asked_at <= thawed_at and a.at >= frozen_at]
    figures["writes_acknowledged"] = len(asked)
    figures.update(_spread("acknowledged", [a.at - a.asked_at for a in asked]))
    if failed_over_at is not None:
        figures["failed_over_s"] = failed_over_at - frozen_at
        ends = [c.started + c.seconds for c in answered]
        figures["last_answer_after_failover_s"] = (
            max(ends) - failed_over_at if ends else float("nan")
        )
        before = [c.seconds for c in answered if c.started < failed_over_at]
        figures["answer_max_issued_before_failover_ms"] = (
            max(before) * 1000 if before else float("nan")
        )
    return figures


def describe(figures: dict[str, float]) -> list[str]:
    """The figures as lines for a person reading the drill's output."""

    def ms(key: str) -> str:
        value = figures[key]
        return "-" if math.isnan(value) else f"{value:.0f}"

    lines = [
        f"write calls in flight while frozen: {figures['calls']:.0f} calls, {figures['calls_ok']:.0f} "
        f"acknowledged, {figures['calls_refused']:.0f} refused, {figures['calls_hung']:.0f} hung; "
        f"answered in p50/p99/max {ms('answer_p50_ms')}/{ms('answer_p99_ms')}/"
        f"{ms('answer_max_ms')} ms",
        f"writes pending while frozen: {figures['writes_acknowledged']:.0f} acknowledged, "
        f"retries included, in p50/p99/max {ms('acknowledged_p50_ms')}/"
        f"{ms('acknowledged_p99_ms')}/{ms('acknowledged_max_ms')} ms",
    ]
    if "failed_over_s" in figures:
        lines.append(
            f"failover {figures['failed_over_s']:.1f} s into the freeze; the last of those "
            f"calls answered {figures['last_answer_after_failover_s']:.1f} s after it; "
            f"longest wait of a call sent before it {ms('answer_max_issued_before_failover_ms')} ms"
        )
    return lines
