"""Hand freed heap memory back to the operating system (glibc's ``malloc_trim``).

onnxruntime frees its load-time scratch and each batch's activations with
``free``; glibc keeps most of it in the process heap, so the serving
process's resident size stays ~50-60 MB above what it uses (measured: model
load +161 MB, +103 MB after a trim). Trimming costs ~10 ms after a batch of
200, so after a batch it happens on a daemon thread, off the request's path.
On a libc without ``malloc_trim`` (musl, macOS) every call is a no-op.

glibc's thresholds are fixed too (:meth:`HeapTrimmer.fix_thresholds`). By
default they move: each freed mapped block raises the size below which
``malloc`` uses the heap instead of a mapping (up to 32 MB), and with it
the free space each per-thread heap keeps rather than returns (twice that,
64 MB). After a few runs of the model, its activations (blocks of 1 to
30 MB) came from per-thread heaps that each kept tens of MB once freed:
during an ingest the serving process held ~150 MB it did not use
(BENCHMARKS.md, issue 17). Fixed, a block of 1 MB or more is mapped and
unmapped on free, and a heap returns its free top beyond 2 MB at once.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading
from collections.abc import Callable

_log = logging.getLogger(__name__)

#: ``mallopt`` parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: Blocks at least this large get a mapping of their own, returned to the system on free.
MMAP_THRESHOLD_BYTES = 1 << 20
#: A heap's free top beyond this is returned to the system on free (glibc's own ratio: 2x).
TRIM_THRESHOLD_BYTES = 2 * MMAP_THRESHOLD_BYTES


def _find_mallopt() -> Callable[[int, int], int] | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt


def _find_malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


class HeapTrimmer:
    """``trim_now`` on the caller's thread; ``trim_soon`` coalesced on one daemon thread."""

    def __init__(self) -> None:
        self._trim = _find_malloc_trim()
        self._mallopt = _find_mallopt() if self._trim is not None else None
        self._wanted = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def available(self) -> bool:
        return self._trim is not None

    def fix_thresholds(self) -> None:
        """Fix glibc's mapping and trim thresholds (module doc); idempotent, process-wide.

        Only on glibc (where ``malloc_trim`` exists): elsewhere ``mallopt``'s
        parameters may mean something else or nothing.
        """
        if self._mallopt is None:
            return
        for param, value in (
            (_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES),
            (_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
        ):
            if self._mallopt(param, value) != 1:
                _log.warning("mallopt(%d, %d) failed", param, value)

    def trim_now(self) -> None:
        if self._trim is not None:
            self._trim(0)

    def trim_soon(self) -> None:
        """Ask for a trim; many requests while one runs make one more trim, not many."""
        if self._trim is None:
            return
        self._wanted.set()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="heap-trim", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            try:
                self.trim_now()
            except Exception:  # never let housekeeping take the process down
                _log.exception("malloc_trim failed")
                return


#: One per process: the heap is per process.
TRIMMER = HeapTrimmer()
