"""memory.providers.heap: freed heap memory handed back, off the caller's thread."""

from __future__ import annotations

import threading
import time

from memory.providers.heap import HeapTrimmer


def test_trim_soon_runs_on_another_thread_and_coalesces() -> None:
    trimmer = HeapTrimmer()
    started, release = threading.Event(), threading.Event()
    seen: list[str] = []

    def slow_trim(pad: int) -> int:
        seen.append(threading.current_thread().name)
        started.set()
        release.wait(5)
        return 1

    trimmer._trim = slow_trim
    trimmer.trim_soon()
    assert started.wait(5)
    # Asked three times while one trim runs: one more trim follows, not three.
    for _ in range(3):
        trimmer.trim_soon()
    release.set()
    deadline = time.monotonic() + 5
    while len(seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    assert seen == ["heap-trim", "heap-trim"]


def test_glibc_trim_is_found_here() -> None:
    # These machines run glibc: the serving process really gives memory back.
    trimmer = HeapTrimmer()
    assert trimmer.available
    trimmer.trim_now()
