"""The embedded PostgreSQL lives as long as the OwnSona processes using its data directory.

Every process here is real (``ownsona serve``, CLI commands): the reference
count is files named after pids, so only separate processes can test it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bootstrap.web import CLOSE_GRACE_S
from storage.embedded import cluster_status, start_embedded, stop_embedded
from tests.e2e.server import run_processes
from tests.opened_rows import memory_texts

from .lifecycle_helpers import GatedProvider, base_env, call_tool, provider_env, provider_server

#: Seconds a stopping server may take (SHUTDOWN_TIMEOUT is 20; nothing is in flight).
STOP_S = 30


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A directory outside pytest's base temp, as the session cluster's is: a parallel pytest
    session makes that one 0700 again, and the cluster runs as its own user when we are root."""
    with tempfile.TemporaryDirectory(prefix="ownsona-lifetime-") as tmp:
        yield Path(tmp)
        stop_embedded(Path(tmp) / "data")  # whatever a failed test left running


def _cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**base_env(), "OWNSONA_DATA_DIR": str(data)}
    return subprocess.run(
        [sys.executable, "-m", "scripts.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _stop_gracefully(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(STOP_S) == 0


def test_a_cli_command_alone_stops_the_cluster_it_started(tmp_path):
    data = tmp_path / "data"
    done = _cli(data, "migrate")
    assert done.returncode == 0, done.stderr
    assert not cluster_status(data).running
    status = _cli(data, "db", "status")
    assert status.returncode == 0, status.stderr
    assert (
        "embedded PostgreSQL: not running" in status.stdout
        and "no OwnSona process" in status.stdout
    )


def test_a_cluster_someone_else_started_is_left_running(tmp_path):
    """A test session, a benchmark or `pg_ctl` started it: an OwnSona command using it
    does not stop it on exit (the test suite's own cluster is such a one)."""
    data = tmp_path / "data"
    started = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, pathlib; from storage.embedded import start_embedded;"
            " start_embedded(pathlib.Path(sys.argv[1]))",
            str(data),
        ],
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 0, started.stderr
    assert cluster_status(data).running
    done = _cli(data, "migrate")
    assert done.returncode == 0, done.stderr
    assert cluster_status(data).running


def test_a_cli_command_leaves_serve_its_cluster_and_serve_stops_it_on_exit(tmp_path):
    data = tmp_path / "data"
    with run_processes(tmp_path) as server:
        server.token()  # `ownsona token`: a CLI command using the same cluster
        assert cluster_status(data).running
        status = _cli(data, "db", "status")
        assert "embedded PostgreSQL: running" in status.stdout, status
        assert f"pid {server.process.pid} (ownsona serve)" in status.stdout, status.stdout
        refused = _cli(data, "db", "stop")
        assert refused.returncode == 1 and "use --force" in refused.stdout, refused
        assert cluster_status(data).running
        _stop_gracefully(server.process)
    assert not cluster_status(data).running
    assert list((data / ".pg-users").iterdir()) == []


def test_a_killed_server_leaves_a_stale_reference_that_db_stop_and_the_next_server_ignore(tmp_path):
    data = tmp_path / "data"
    with run_processes(tmp_path) as server:
        server.process.kill()  # SIGKILL: nothing of ours runs
        server.process.wait(STOP_S)
    assert cluster_status(data).running  # left behind: nobody could stop it
    assert cluster_status(data).users == []  # the dead server's file counts for nothing
    status = _cli(data, "db", "status")
    assert (
        "no OwnSona process" in status.stdout and "`ownsona db stop` stops it" in status.stdout
    ), status
    stopped = _cli(data, "db", "stop")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped
    assert not cluster_status(data).running
    with run_processes(tmp_path) as server:  # starts it again, beside the stale file
        assert cluster_status(data).running
        _stop_gracefully(server.process)
    assert not cluster_status(data).running
    assert _cli(data, "db", "stop").stdout.strip().endswith("is not running")


def test_ctrl_c_during_a_batch_in_the_embedded_default_answers_it_exits_and_stops_the_cluster(
    tmp_path,
):
    data = tmp_path / "data"
    gated = GatedProvider(gate_at=200)
    items = [
        {"text": f"Embedded fact {i}: box {i} holds the fuses.", "dedup_policy": "insert"}
        for i in range(200)
    ]
    with provider_server(gated) as base_url:
        env = {"METRICS_ENABLED": "true", "SHUTDOWN_TIMEOUT": "5", **provider_env(base_url)}
        with run_processes(tmp_path, env) as server:
            token = server.token()
            answer: dict[str, object] = {}
            caller = threading.Thread(
                target=lambda: answer.update(
                    call_tool(server.url, token, "remember_batch", {"items": items})
                )
            )
            caller.start()
            assert gated.held.wait(30), server.log()
            server.process.send_signal(signal.SIGINT)
            signalled = time.monotonic()
            gated.release()
            caller.join(STOP_S)
            assert answer.get("summary") == {"total": 200, "succeeded": 200, "failed": 0}, (
                server.log()
            )
            assert server.process.wait(5 + CLOSE_GRACE_S + 5) == 0, server.log()
            assert time.monotonic() - signalled < 5 + CLOSE_GRACE_S + 5
            assert "Traceback" not in server.log()
    assert not cluster_status(data).running
    dsn = start_embedded(data)  # this test's own look at what was stored
    stored = [text for _, text in memory_texts(dsn)]
    assert sorted(stored) == sorted(item["text"] for item in items)
