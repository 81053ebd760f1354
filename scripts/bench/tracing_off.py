"""What the span helpers cost a tool call while tracing is off (the default).

    python -m scripts.bench.tracing_off

One tool call passes through three of them (bearer check, tool call, embedding);
they are timed against three null context managers in the same run, so the
ratio survives a noisy machine.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable

from api.tracing import bearer_span, tool_outcome, tool_span
from memory.providers.embedding import embedding_span


def with_spans() -> None:
    with bearer_span():
        pass
    with tool_span("recall", queued=False) as span:
        with embedding_span("local", "all-MiniLM-L6-v2", 1):
            pass
        tool_outcome(span, None)


def with_null_contexts() -> None:
    with contextlib.nullcontext():
        pass
    with contextlib.nullcontext(), contextlib.nullcontext():
        pass


def per_call_us(fn: Callable[[], None], n: int = 20_000, rounds: int = 5) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - started) / n * 1e6)
    return statistics.median(samples)


if __name__ == "__main__":
    spans = per_call_us(with_spans)
    base = per_call_us(with_null_contexts)
    print(f"span helpers, tracing off: {spans:.2f} us per tool call (median of 5 x 20000)")
    print(f"three null contexts:       {base:.2f} us per tool call")
