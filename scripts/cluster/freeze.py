"""Freezing a node as a paused machine freezes: SIGSTOP every process, later SIGCONT.

A frozen node answers nothing and closes nothing: its sockets stay open, the
kernel still accepts connections to its listening port, and whatever was sent
to it is processed when it resumes (issue 33). A PostgreSQL node is its
postmaster and every backend and auxiliary process under it.
"""

from __future__ import annotations

import contextlib
import os
import signal

from scripts.processes import child_pids


def freeze(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)


def thaw(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def process_tree(pid: int | None) -> list[int]:
    """``pid`` and its children (a postmaster's backends), or nothing when it is gone."""
    return [] if pid is None else [pid, *child_pids(pid)]
