"""SIGTERM in the middle of a remember_batch: the answer still comes, every item lands once.

Platforms stop a process with SIGTERM and kill it 30 s later. The embedding
provider here is the OpenAI-compatible test server holding the batch's
embedding call until the test lets it go, so the signal arrives while the
write is certainly in flight on a worker.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from config.settings import Settings
from tasks.actors import declare_actors
from tasks.broker import make_broker
from tasks.queue import DramatiqWriteQueue
from tests.conftest import QUEUE_NAMESPACE
from tests.e2e.server import run_processes
from tests.opened_rows import memory_texts
from tests.tasks.test_durability import _rows, _wait_until_taken
from tests.tool_calls import meta_for, parse_command

from .lifecycle_helpers import GatedProvider, base_env, call_tool, provider_env, provider_server

BATCH = 200
#: Platforms send SIGKILL this long after SIGTERM.
PLATFORM_GRACE_S = 30


def _items(tag: str) -> list[dict[str, Any]]:
    return [
        {"text": f"{tag} fact {i}: shelf {i} holds the jars.", "dedup_policy": "insert"}
        for i in range(BATCH)
    ]


@pytest.fixture
def provider() -> Iterator[tuple[GatedProvider, str]]:
    gated = GatedProvider(gate_at=BATCH)
    with provider_server(gated) as base_url:
        yield gated, base_url


def _user_rows(dsn: str, username: str) -> list[str]:
    return [text for _, text in memory_texts(dsn, "u.username = %s", (username,))]


def _refuses_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return False
    except OSError:
        return True


def test_serve_finishes_the_batch_in_flight_and_exits_cleanly(clean_db, provider, tmp_path):
    gated, base_url = provider
    with run_processes(tmp_path, {"DATABASE_URL": clean_db, **provider_env(base_url)}) as server:
        token = server.token()
        items = _items("Serve")
        answer: dict[str, Any] = {}

        def call() -> None:
            answer.update(call_tool(server.url, token, "remember_batch", {"items": items}))

        caller = threading.Thread(target=call)
        caller.start()
        assert gated.held.wait(30), server.log()  # the in-process worker is embedding the batch
        server.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        port = int(server.url.rsplit(":", 1)[1])
        deadline = signalled + 10
        while not _refuses_connections(port):
            assert time.monotonic() < deadline, "still accepting connections after SIGTERM"
            time.sleep(0.05)
        assert caller.is_alive()  # no answer yet: the write is still waiting for its embeddings
        gated.release()
        caller.join(PLATFORM_GRACE_S)
        assert answer.get("summary") == {"total": BATCH, "succeeded": BATCH, "failed": 0}, (
            server.log()
        )
        assert server.process.wait(PLATFORM_GRACE_S) == 0, server.log()
        assert time.monotonic() - signalled < PLATFORM_GRACE_S
    assert sorted(_user_rows(clean_db, "e2e")) == sorted(item["text"] for item in items)
    assert gated.gated_calls == 1


def _start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[str]:
    with open(log, "w") as out:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [sys.executable, "-m", "scripts.cli", "worker", "--threads", "2"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    deadline = time.monotonic() + 60
    while "worker running" not in log.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    return proc


def _stop(proc: subprocess.Popen[str] | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait(10)


@pytest.mark.parametrize(
    ("shutdown_timeout", "finisher"),
    [
        # Within the timeout the stopping worker finishes the batch itself.
        ("20", "stopping worker"),
        # Past it the worker hands the batch back; the other one runs it. The heartbeat
        # timeout is far off, so only the explicit requeue can bring it back in time.
        ("1", "other worker"),
    ],
)
async def test_a_stopped_worker_finishes_or_hands_back_its_batch(
    clean_db, redis_url, alice, provider, tmp_path, shutdown_timeout, finisher
):
    gated, base_url = provider
    env = {
        **base_env(),
        **provider_env(base_url),
        "DATABASE_URL": clean_db,
        "REDIS_URL": redis_url,
        "QUEUE_NAMESPACE": QUEUE_NAMESPACE,
        "QUEUE_HEARTBEAT_TIMEOUT": "120000",
        "SHUTDOWN_TIMEOUT": shutdown_timeout,
    }
    bundle = make_broker(redis_url, namespace=QUEUE_NAMESPACE)
    queue = DramatiqWriteQueue(bundle, declare_actors(bundle.broker), timeout_s=90)
    items = _items("Worker")
    first = second = None
    try:
        first = _start_worker(env, tmp_path / "first.log")
        call = asyncio.create_task(
            queue.submit(
                meta_for(alice, "sigterm-1"),
                parse_command("remember_batch", {"items": items}, Settings()),
            )
        )
        await _wait_until_taken(redis_url)
        assert await asyncio.to_thread(gated.held.wait, 30)  # the first worker is embedding
        second = _start_worker(env, tmp_path / "second.log")
        first.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        if finisher == "stopping worker":
            await asyncio.sleep(1)
            assert first.poll() is None  # it waits for its running batch
            gated.release()
            exit_code = await asyncio.to_thread(first.wait, PLATFORM_GRACE_S)
        else:
            exit_code = await asyncio.to_thread(first.wait, PLATFORM_GRACE_S)
            assert not call.done()
            assert _rows(clean_db, alice) == []  # the abandoned batch wrote nothing
            gated.release()
        assert exit_code == 0, (tmp_path / "first.log").read_text()
        assert time.monotonic() - signalled < PLATFORM_GRACE_S
        payload = await asyncio.wait_for(call, 60)
    finally:
        gated.release()
        _stop(first)
        _stop(second)
        await queue.aclose()
        bundle.broker.close()
    assert payload["summary"] == {"total": BATCH, "succeeded": BATCH, "failed": 0}
    rows = _rows(clean_db, alice)
    assert sorted(text for _, text in rows) == sorted(item["text"] for item in items)
    assert sorted(r["memory_id"] for r in payload["results"]) == [row_id for row_id, _ in rows]
    first_log = (tmp_path / "first.log").read_text()
    if finisher == "stopping worker":
        assert gated.gated_calls == 1 and "requeued" not in first_log
    else:
        assert gated.gated_calls == 2 and "requeued for another worker" in first_log


#: Seconds a SIGINT'ed server may take beyond its drain (SHUTDOWN_TIMEOUT) and close allowance.
EXIT_MARGIN_S = 5


def _metrics_server_env(clean_db: str, base_url: str) -> dict[str, str]:
    # The in-process worker (no REDIS_URL) with metrics on: the configuration that hung.
    return {
        "DATABASE_URL": clean_db,
        "METRICS_ENABLED": "true",
        "SHUTDOWN_TIMEOUT": "5",
        **provider_env(base_url),
    }


def test_ctrl_c_during_a_batch_answers_it_and_exits_within_the_grace_period(
    clean_db, provider, tmp_path
):
    from bootstrap.web import CLOSE_GRACE_S

    gated, base_url = provider
    with run_processes(tmp_path, _metrics_server_env(clean_db, base_url)) as server:
        token = server.token()
        items = _items("Interrupted")
        answer: dict[str, Any] = {}
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
        caller.join(PLATFORM_GRACE_S)
        assert answer.get("summary") == {"total": BATCH, "succeeded": BATCH, "failed": 0}, (
            server.log()
        )
        try:
            code = server.process.wait(5 + CLOSE_GRACE_S + EXIT_MARGIN_S)
        except subprocess.TimeoutExpired:
            raise AssertionError("still running after Ctrl-C:\n" + server.log()) from None
        assert code == 0, server.log()
        assert time.monotonic() - signalled < 5 + CLOSE_GRACE_S + EXIT_MARGIN_S
        assert "Traceback" not in server.log()
    assert sorted(_user_rows(clean_db, "e2e")) == sorted(item["text"] for item in items)


def test_a_second_ctrl_c_exits_at_once_without_a_traceback(clean_db, provider, tmp_path):
    gated, base_url = provider
    with run_processes(tmp_path, _metrics_server_env(clean_db, base_url)) as server:
        token = server.token()
        outcome: list[BaseException | dict[str, Any]] = []

        def call() -> None:
            try:
                outcome.append(
                    call_tool(server.url, token, "remember_batch", {"items": _items("Twice")})
                )
            except BaseException as ex:  # the connection drops: the batch is not acknowledged
                outcome.append(ex)

        caller = threading.Thread(target=call)
        caller.start()
        assert gated.held.wait(30), server.log()
        server.process.send_signal(signal.SIGINT)
        port = int(server.url.rsplit(":", 1)[1])
        deadline = time.monotonic() + 10
        while not _refuses_connections(port):  # the first Ctrl-C has been handled
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.05)
        server.process.send_signal(signal.SIGINT)
        interrupted = time.monotonic()
        try:
            code = server.process.wait(5)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                "a second Ctrl-C did not stop the server:\n" + server.log()
            ) from None
        assert time.monotonic() - interrupted < 5
        assert code == 130, server.log()
        assert "Traceback" not in server.log() and "interrupted again" in server.log()
        caller.join(PLATFORM_GRACE_S)
    assert outcome and not isinstance(outcome[0], dict), outcome  # never answered ...
    assert _user_rows(clean_db, "e2e") == []  # ... and nothing stored behind the caller's back


async def test_a_second_ctrl_c_stops_a_worker_at_once_and_its_batch_goes_to_another(
    clean_db, redis_url, alice, provider, tmp_path
):
    gated, base_url = provider
    env = {
        **base_env(),
        **provider_env(base_url),
        "DATABASE_URL": clean_db,
        "REDIS_URL": redis_url,
        "QUEUE_NAMESPACE": QUEUE_NAMESPACE,
        "QUEUE_HEARTBEAT_TIMEOUT": "2000",
        "SHUTDOWN_TIMEOUT": "20",
    }
    bundle = make_broker(redis_url, namespace=QUEUE_NAMESPACE)
    queue = DramatiqWriteQueue(bundle, declare_actors(bundle.broker), timeout_s=90)
    items = _items("Worker twice")
    first = second = None
    try:
        first = _start_worker(env, tmp_path / "first.log")
        call = asyncio.create_task(
            queue.submit(
                meta_for(alice, "sigint-twice"),
                parse_command("remember_batch", {"items": items}, Settings()),
            )
        )
        await _wait_until_taken(redis_url)
        assert await asyncio.to_thread(gated.held.wait, 30)  # the first worker is embedding
        first.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 10
        while (
            "Shutting down" not in (tmp_path / "first.log").read_text()
        ):  # the first Ctrl-C is being handled
            assert first.poll() is None and time.monotonic() < deadline, (
                tmp_path / "first.log"
            ).read_text()
            await asyncio.sleep(0.05)
        assert first.poll() is None  # ... and waits for the running batch
        first.send_signal(signal.SIGINT)
        interrupted = time.monotonic()
        assert await asyncio.to_thread(first.wait, 5) == 130
        assert time.monotonic() - interrupted < 5
        log = (tmp_path / "first.log").read_text()
        assert "Traceback" not in log and "interrupted again" in log
        assert (
            not call.done() and _rows(clean_db, alice) == []
        )  # nothing acknowledged, nothing stored
        gated.release()
        # The abandoned message is redelivered after the heartbeat timeout: stored once.
        second = _start_worker(env, tmp_path / "second.log")
        payload = await asyncio.wait_for(call, 60)
    finally:
        gated.release()
        _stop(first)
        _stop(second)
        await queue.aclose()
        bundle.broker.close()
    assert payload["summary"] == {"total": BATCH, "succeeded": BATCH, "failed": 0}
    assert sorted(text for _, text in _rows(clean_db, alice)) == sorted(
        item["text"] for item in items
    )


def test_one_ctrl_c_in_a_terminal_stops_worker_processes_gracefully(clean_db, redis_url, tmp_path):
    """A terminal signals the whole process group; each child must see that Ctrl-C once, not twice."""
    env = {
        **base_env(),
        "DATABASE_URL": clean_db,
        "REDIS_URL": redis_url,
        "QUEUE_NAMESPACE": QUEUE_NAMESPACE,
        "WORKER_PROCESSES": "2",
        "WORKER_THREADS": "1",
    }
    log = tmp_path / "workers.log"
    with open(log, "w") as out:
        parent = subprocess.Popen(
            [sys.executable, "-m", "scripts.cli", "worker"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while log.read_text().count("worker running") < 2:
            assert parent.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        os.killpg(parent.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
        assert parent.wait(PLATFORM_GRACE_S) == 0, log.read_text()
        assert "interrupted again" not in log.read_text()
    finally:
        _stop(parent)
