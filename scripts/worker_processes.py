"""``ownsona worker --processes N``: N worker processes under one parent.

Dramatiq's own CLI forks its worker processes, but it wants a broker built
at import time; ours is built by the composition root (``ownsona worker``),
so the parent starts N copies of that command instead. Each child is a
complete worker (its own broker connection, pool and model) and stops
gracefully on SIGTERM by itself.

The parent forwards SIGTERM and SIGINT, because a container runtime signals
only PID 1 (a Procfile platform signals every process; a child that gets
the signal twice stops once; for SIGINT the children run in their own
process groups, so that a terminal's Ctrl-C arrives once, and a second
Ctrl-C stops them at once). When one child fails, the parent stops the
rest and exits with the child's code, so the platform restarts the whole
set instead of running on quietly with fewer workers.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

#: How often the parent looks at its children, in seconds.
_POLL_S = 0.2


def run_worker_processes(count: int, threads: int) -> int:
    """Run ``count`` single-process workers with ``threads`` threads each; return an exit code."""
    command = [
        sys.executable,
        "-m",
        "scripts.cli",
        "worker",
        "--processes",
        "1",
        "--threads",
        str(threads),
    ]
    # Each child in a process group of its own: a terminal's Ctrl-C reaches only this parent,
    # which forwards it once; reaching a child twice, it would count as the second Ctrl-C
    # that exits at once (tasks.shutdown.stop_on_signals).
    children = [subprocess.Popen(command, process_group=0) for _ in range(count)]

    def forward(signum: int, _frame: object) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    failure = 0
    while any(child.poll() is None for child in children):
        for child in children:
            code = child.poll()
            if code not in (None, 0) and not failure:
                failure = code if code > 0 else 128 - code  # killed by signal -code
                print(
                    f"ownsona worker: a worker process exited with {code}; stopping the others",
                    file=sys.stderr,
                    flush=True,
                )
                forward(signal.SIGTERM, None)
        time.sleep(_POLL_S)
    for child in children:
        if child.returncode and not failure:
            failure = child.returncode if child.returncode > 0 else 128 - child.returncode
    return failure
