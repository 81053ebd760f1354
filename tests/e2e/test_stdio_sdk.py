"""``ownsona stdio`` as a local client runs it: a real process, the official SDK's stdio client.

The process serves the test database (DATABASE_URL) for one user; its
writes go through the in-process worker, or with REDIS_URL through Redis to
a separate ``ownsona worker``. What it stores is there for the same user
over HTTP (a running ``ownsona serve``) and in the database, and for nobody
else. Raw-pipe tests check what the SDK cannot see: that standard output
carries JSON-RPC and nothing else, and how the process ends.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, BinaryIO

import psycopg
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from api.mcp.dispatch import SUPPORTED_VERSIONS
from tests.conftest import make_user
from tests.opened_rows import user_texts
from tests.ops.lifecycle_helpers import base_env, call_tool

from .server import run_processes

_ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path, dsn: str, **extra: str) -> dict[str, str]:
    return {
        **base_env(),
        "PYTHONPATH": str(_ROOT),
        "DATABASE_URL": dsn,
        "OWNSONA_DATA_DIR": str(tmp_path / "data"),
        "LOG_FORMAT": "json",
        **extra,
    }


def _params(tmp_path: Path, dsn: str, user: str, **extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "scripts.cli", "stdio", "--user", user],
        env=_env(tmp_path, dsn, **extra),
        cwd=str(_ROOT),
    )


def _user_rows(dsn: str) -> list[tuple[str, str]]:
    return user_texts(dsn, "m.deleted_at IS NULL")


async def test_the_sdk_stdio_client_remembers_and_recalls(tmp_path: Path, clean_db: str) -> None:
    make_user(clean_db, "dana")
    make_user(clean_db, "erin")
    errlog = open(tmp_path / "stderr.log", "w")  # noqa: SIM115 - closed below
    try:
        async with Client(stdio_client(_params(tmp_path, clean_db, "dana"), errlog=errlog)) as c:
            assert c.protocol_version in SUPPORTED_VERSIONS
            assert c.server_info is not None and c.server_info.name == "ownsona"
            tools = {t.name for t in (await c.list_tools()).tools}
            assert {"remember", "recall", "forget", "remember_batch"} <= tools

            stored = await c.call_tool("remember", {"text": "I keep bees on the roof."})
            assert stored.is_error is False, stored.structured_content
            memory_id = stored.structured_content["memory_id"]
            found = await c.call_tool("recall", {"query": "what hobby do I have", "limit": 3})
            assert found.is_error is False
            assert found.structured_content["matches"][0]["id"] == memory_id
            text = found.content[0].text  # type: ignore[union-attr]
            assert json.loads(text) == found.structured_content
    finally:
        errlog.close()
    # In the database, for dana alone.
    assert _user_rows(clean_db) == [("dana", "I keep bees on the roof.")]
    log = (tmp_path / "stderr.log").read_text()
    assert "in-process worker" in log and "I keep bees" not in log  # never memory text


async def test_a_pinned_handshake_version_still_works(tmp_path: Path, clean_db: str) -> None:
    make_user(clean_db, "dana")
    with open(os.devnull, "w") as quiet:
        params = _params(tmp_path, clean_db, "dana")
        async with Client(stdio_client(params, errlog=quiet), mode="legacy") as c:
            assert c.protocol_version == "2025-11-25"  # the SDK's newest handshake version
            counted = await c.call_tool("count_memories", {})
            assert counted.is_error is False and counted.structured_content["count"] == 0


async def test_with_redis_writes_go_to_the_worker_and_show_over_http(
    tmp_path: Path, dsn: str, redis_url: str, clean_db: str
) -> None:
    """REDIS_URL: the stdio process queues writes for a separate `ownsona worker`."""
    with run_processes(
        tmp_path, {"DATABASE_URL": dsn, "REDIS_URL": redis_url}, workers=1
    ) as server:
        make_user(dsn, "dana")
        token = server.token("dana")
        http_id = call_tool(server.url, token, "remember", {"text": "My cat is called Miso."})[
            "memory_id"
        ]
        errlog = open(tmp_path / "stdio-stderr.log", "w")  # noqa: SIM115 - closed below
        try:
            params = _params(tmp_path, dsn, "dana", REDIS_URL=redis_url)
            async with Client(stdio_client(params, errlog=errlog)) as c:
                # What HTTP stored is there over stdio, and the other way round.
                found = await c.call_tool("recall", {"query": "cat's name", "limit": 3})
                assert found.structured_content["matches"][0]["id"] == http_id
                stored = await c.call_tool("remember", {"text": "I cycle to work on Fridays."})
                assert stored.is_error is False, stored.structured_content
        finally:
            errlog.close()
        over_http = call_tool(server.url, token, "recall", {"query": "how do I commute"})
        assert over_http["matches"][0]["id"] == stored.structured_content["memory_id"]
        assert "Redis (REDIS_URL)" in (tmp_path / "stdio-stderr.log").read_text()
        worker_log = (tmp_path / "worker0.log").read_text()
        assert "run_command Remember" in worker_log  # the write ran on the separate worker


# --- raw pipes: what is on stdout, how the process ends ---------------------------------


class Raw:
    """``ownsona stdio`` on plain pipes; any still running when its test ends is killed."""

    running: list[Raw] = []

    def __init__(self, proc: asyncio.subprocess.Process, stderr: BinaryIO) -> None:
        self.proc = proc
        self.stderr = stderr
        Raw.running.append(self)

    @classmethod
    async def start(cls, tmp_path: Path, dsn: str, user: str, **extra: str) -> Raw:
        stderr = open(tmp_path / "raw-stderr.log", "wb")  # noqa: SIM115 - closed at teardown
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "scripts.cli",
            "stdio",
            "--user",
            user,
            env=_env(tmp_path, dsn, **extra),
            cwd=str(_ROOT),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
        )
        return cls(proc, stderr)

    async def send(self, line: bytes | dict[str, Any] | list[dict[str, Any]]) -> None:
        assert self.proc.stdin is not None
        raw = line if isinstance(line, bytes) else json.dumps(line).encode() + b"\n"
        self.proc.stdin.write(raw)
        await self.proc.stdin.drain()

    async def reply(self) -> Any:
        """The next line of stdout: a JSON-RPC response, or a batch of them."""
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 120)
        assert line.endswith(b"\n"), line
        message = json.loads(line)
        for item in message if isinstance(message, list) else [message]:
            assert item["jsonrpc"] == "2.0" and "id" in item, item
            assert ("result" in item) != ("error" in item), item
        return message

    async def rest_of_stdout(self) -> bytes:
        assert self.proc.stdout is not None
        return await asyncio.wait_for(self.proc.stdout.read(), 60)


@pytest.fixture(autouse=True)
async def _no_process_left() -> AsyncIterator[None]:
    yield
    while Raw.running:
        raw = Raw.running.pop()
        if raw.proc.returncode is None:
            raw.proc.kill()
            await raw.proc.wait()
        raw.stderr.close()


def _initialize() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-03-26",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }


async def test_stdout_carries_only_json_rpc_and_end_of_input_exits_cleanly(
    tmp_path: Path, clean_db: str
) -> None:
    make_user(clean_db, "dana")
    raw = await Raw.start(tmp_path, clean_db, "dana", MAX_BODY_BYTES="2048")
    await raw.send(_initialize())
    assert (await raw.reply())["result"]["protocolVersion"] == "2025-03-26"
    await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    await raw.send(b"this is not json\n")
    assert (await raw.reply())["error"]["code"] == -32700
    await raw.send(
        b'{"jsonrpc": "2.0", "id": 2, "method": "ping", "pad": "' + b"x" * 4096 + b'"}\n'
    )
    too_long = await raw.reply()
    assert too_long["id"] is None and too_long["error"]["code"] == -32600
    # 2025-03-26 has batches.
    await raw.send(
        [
            {"jsonrpc": "2.0", "id": 3, "method": "ping"},
            {"jsonrpc": "2.0", "id": 4, "method": "tools/list"},
        ]
    )  # type: ignore[arg-type]
    batch = await raw.reply()
    assert [m["id"] for m in batch] == [3, 4]  # type: ignore[index]
    await raw.send(
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "remember", "arguments": {"text": "I was born in Lisbon."}},
        }
    )
    assert (await raw.reply())["result"]["isError"] is False

    assert raw.proc.stdin is not None
    raw.proc.stdin.close()  # end of input: the spec's shutdown signal
    closed_at = time.monotonic()
    assert await raw.rest_of_stdout() == b""  # nothing but the replies, ever
    assert await asyncio.wait_for(raw.proc.wait(), 60) == 0
    exit_s = time.monotonic() - closed_at
    # The SDK's client waits 2 s after closing stdin before it sends SIGTERM.
    assert exit_s < 2.0, exit_s
    print(f"\nstdio exit after end of input: {exit_s * 1000:.0f} ms")
    assert _user_rows(clean_db) == [("dana", "I was born in Lisbon.")]
    log = (tmp_path / "raw-stderr.log").read_text()
    assert "stdio session ended" in log and "Lisbon" not in log


async def test_sigterm_ends_the_session_cleanly(tmp_path: Path, clean_db: str) -> None:
    make_user(clean_db, "dana")
    raw = await Raw.start(tmp_path, clean_db, "dana")
    await raw.send(_initialize())
    await raw.reply()
    raw.proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(raw.proc.wait(), 60) == 0
    assert await raw.rest_of_stdout() == b""


async def test_an_unknown_user_is_a_clear_error_exit(tmp_path: Path, clean_db: str) -> None:
    make_user(clean_db, "dana")
    raw = await Raw.start(tmp_path, clean_db, "nobody")
    assert await asyncio.wait_for(raw.proc.wait(), 120) == 2
    assert await raw.rest_of_stdout() == b""
    log = (tmp_path / "raw-stderr.log").read_text()
    assert "account error: There is no account 'nobody'" in log, log


async def test_a_disabled_user_is_refused(tmp_path: Path, clean_db: str) -> None:
    user_id = make_user(clean_db, "dana")
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("UPDATE users SET disabled = true WHERE id = %s", (user_id,))
    raw = await Raw.start(tmp_path, clean_db, "dana")
    assert await asyncio.wait_for(raw.proc.wait(), 120) == 2
    assert await raw.rest_of_stdout() == b""
    assert "ownsona user enable dana" in (tmp_path / "raw-stderr.log").read_text()
