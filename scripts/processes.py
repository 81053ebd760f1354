"""Run ``ownsona serve`` (and workers) as real processes: for benchmarks and end-to-end tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_healthy(
    url: str,
    proc: subprocess.Popen[bytes],
    *,
    timeout_s: float = 90,
    probe_timeout_s: float = 1,
    poll_s: float = 0.1,
) -> str | None:
    """Poll ``url``/healthz until it answers 200: None, or why not ("exited with 1", ...).

    The caller words the error (a test fails, a benchmark exits), so this only says what
    went wrong.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return f"exited with {proc.returncode}"
        try:
            if httpx.get(f"{url}/healthz", timeout=probe_timeout_s).status_code == 200:
                return None
        except httpx.HTTPError:
            pass
        time.sleep(poll_s)
    return "did not come up"


@dataclass
class RunningServer:
    url: str
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    log_path: Path

    def token(self, user: str = "e2e") -> str:
        out = subprocess.run(
            [sys.executable, "-m", "scripts.cli", "token", "--user", user],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        return out.stdout.strip().splitlines()[-1]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def stop_process(proc: subprocess.Popen[bytes] | None, timeout_s: float = 30) -> None:
    """SIGTERM, and SIGKILL if it has not ended within ``timeout_s``; a no-op once ended."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def kill_process(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGKILL (the machine dies: nothing is flushed or handed over); a no-op once ended."""
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def child_pids(parent: int) -> list[int]:
    """Pids whose parent is ``parent``, read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # ended meanwhile
            # The fields after the command name (which may hold spaces): state, ppid, ...
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == parent:
                found.append(int(entry.name))
    return found


@contextmanager
def run_processes(
    tmp_path: Path, extra_env: dict[str, str] | None = None, *, workers: int = 0
) -> Iterator[RunningServer]:
    """``ownsona serve`` (and ``workers`` × ``ownsona worker``) on the embedded default.

    Everything is stopped on exit, workers first, each process's log closed after it.
    """
    port = free_port()
    env = {
        **os.environ,
        "PORT": str(port),
        "OWNSONA_DATA_DIR": str(tmp_path / "data"),
        "OWNSONA_LOGIN_USERNAME": "e2e",
        "OWNSONA_LOGIN_PASSWORD": "correct horse battery",
        **(extra_env or {}),
    }
    for name in ("REDIS_URL", "DATABASE_URL", "OWNSONA_PUBLIC_URL"):
        if name not in (extra_env or {}):
            env.pop(name, None)  # the embedded default unless the test asks otherwise
    log_path = tmp_path / "serve.log"
    # An ExitStack unwinds in reverse: each worker stops (then its log closes) before the
    # server does, as the processes were started.
    with ExitStack() as stack:
        log = stack.enter_context(open(log_path, "w"))
        server = subprocess.Popen(
            [sys.executable, "-m", "scripts.cli", "serve"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        stack.callback(stop_process, server)
        url = f"http://127.0.0.1:{port}"
        problem = wait_until_healthy(url, server)
        if problem is not None:
            raise AssertionError(f"server {problem}:\n{log_path.read_text()}")
        for n in range(workers):
            wlog = stack.enter_context(open(tmp_path / f"worker{n}.log", "w"))
            worker = subprocess.Popen(
                [sys.executable, "-m", "scripts.cli", "worker", "--threads", "2"],
                env=env,
                stdout=wlog,
                stderr=subprocess.STDOUT,
            )
            stack.callback(stop_process, worker)
        yield RunningServer(url=url, env=env, process=server, log_path=log_path)
