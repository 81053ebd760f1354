"""Run ``ownsona serve`` (and workers) as real processes: for benchmarks and end-to-end tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RunningServer:
    url: str
    env: dict[str, str]
    process: subprocess.Popen
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


def _wait_for(url: str, proc: subprocess.Popen, log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"server did not come up:\n{log.read_text()}")


@contextmanager
def run_processes(
    tmp_path: Path, extra_env: dict[str, str] | None = None, *, workers: int = 0
) -> Iterator[RunningServer]:
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
    procs: list[tuple[subprocess.Popen, object]] = []
    log_path = tmp_path / "serve.log"
    log = open(log_path, "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "scripts.cli", "serve"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    procs.append((server, log))
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_for(url, server, log_path)
        for n in range(workers):
            wlog = open(tmp_path / f"worker{n}.log", "w")
            worker = subprocess.Popen(
                [sys.executable, "-m", "scripts.cli", "worker", "--threads", "2"],
                env=env,
                stdout=wlog,
                stderr=subprocess.STDOUT,
            )
            procs.append((worker, wlog))
        yield RunningServer(url=url, env=env, process=server, log_path=log_path)
    finally:
        for proc, handle in reversed(procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            handle.close()  # type: ignore[attr-defined]
