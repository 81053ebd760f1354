"""The Procfile on a Heroku-like platform, run by honcho as a platform would run it.

``release`` migrates a database of its own on the session's PostgreSQL; then
two ``web`` and two ``worker`` processes start from the Procfile with only
platform variables (``DATABASE_URL`` in ``postgres://`` form with
``sslmode``, ``REDIS_URL``, ``PORT``, ``OWNSONA_PUBLIC_URL``) and share the
machine's Redis under a queue namespace of this module's own. The official
MCP SDK client talks to both web processes. One honcho start serves the
whole module; the last test stops it and looks for leftover processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import psycopg
import pytest
import redis
import redis.asyncio as aredis
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from psycopg import sql

from storage.migrate import migrate
from storage.schema import available_migrations
from tasks.actors import WRITE_QUEUE
from tests.conftest import TEST_DIMENSIONS, delete_namespace, sealing_env
from tests.e2e.server import RunningServer, free_port
from tests.opened_rows import memory_texts
from tests.ops.lifecycle_helpers import failed_sign_in

ROOT = Path(__file__).resolve().parents[2]
USERNAME = "procfile"
#: uvicorn processes in each web process: several, as a platform's WEB_CONCURRENCY asks.
WEB_CONCURRENCY = 2
_WEB_STARTED = r"\bweb\.\d+ +\| .*Application startup complete"
#: Long enough that embedding a batch keeps a worker busy for a moment.
_FILLER = "and she keeps the receipts in the blue folder on the second shelf of the hall cupboard."


def _database_url(dsn: str, database: str) -> str:
    """The platform form: ``postgres://`` with ``sslmode``, as Heroku-like platforms set it.

    The embedded cluster listens on a Unix socket, where libpq does not use
    TLS, so ``sslmode=require`` is accepted here as it is by a TLS server.
    """
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    return f"postgres://{info['user']}:@/{database}?host={info['host']}&sslmode=require"


@dataclass
class Platform:
    web_urls: list[str]
    env: dict[str, str]
    database_url: str
    redis_url: str
    namespace: str
    honcho: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def token(self) -> str:
        server = RunningServer(self.web_urls[0], self.env, self.honcho, self.log_path)
        return server.token(USERNAME)

    def rows(self, prefix: str = "") -> list[tuple[int, str]]:
        """``(id, text)`` of the memories whose text starts with ``prefix``, sealed or not."""
        return [row for row in memory_texts(self.database_url) if row[1].startswith(prefix)]


def _honcho(*args: str) -> list[str]:
    return [sys.executable, "-m", "honcho", "-f", str(ROOT / "Procfile"), "-d", str(ROOT), *args]


def _wait_until_up(platform: Platform, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    pending = set(platform.web_urls)
    while time.monotonic() < deadline:
        if platform.honcho.poll() is not None:
            raise AssertionError(
                f"honcho exited with {platform.honcho.returncode}:\n{platform.log()}"
            )
        for url in list(pending):
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    pending.discard(url)
            except httpx.HTTPError:
                pass
        log = platform.log()
        workers = re.findall(r"\bworker\.\d+ +\| OwnSona worker running", log)
        webs = re.findall(_WEB_STARTED, log)
        if not pending and len(workers) == 2 and len(webs) == 2 * WEB_CONCURRENCY:
            return
        time.sleep(0.2)
    raise AssertionError(f"the Procfile processes did not come up:\n{platform.log()}")


@pytest.fixture(scope="module")
def platform(
    dsn: str, redis_server_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Platform]:
    database = f"ownsona_procfile_{os.getpid()}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    namespace = f"ownsona-procfile-{os.getpid()}"
    tmp = tmp_path_factory.mktemp("procfile")
    base_port = free_port()
    # honcho gives the n-th process of the k-th type PORT = base + 100*k + n.
    web_urls = [f"http://127.0.0.1:{base_port}", f"http://127.0.0.1:{base_port + 1}"]
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("OWNSONA_", "DATABASE_", "REDIS_", "WORKER_", "WEB_", "EMBEDDING_"))
    }
    database_url = _database_url(dsn, database)
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        PYTHONUNBUFFERED="1",
        DATABASE_URL=database_url,
        REDIS_URL=redis_server_url,
        QUEUE_NAMESPACE=namespace,
        # Behind a platform's router both processes answer for one public address.
        OWNSONA_PUBLIC_URL=web_urls[0],
        OWNSONA_LOGIN_USERNAME=USERNAME,
        OWNSONA_LOGIN_PASSWORD="procfile horse battery staple",
        WEB_CONCURRENCY=str(WEB_CONCURRENCY),
        WORKER_THREADS="2",
        **sealing_env(),  # the platform seals as the session's rows are sealed
    )
    env_file = tmp / "empty.env"  # honcho would otherwise read ./.env
    env_file.write_text("")
    keys = redis.Redis.from_url(redis_server_url)

    def clear_queue() -> None:
        delete_namespace(keys, namespace)

    clear_queue()
    release = subprocess.run(
        _honcho("-e", str(env_file), "start", "release"),
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert release.returncode == 0, release.stdout + release.stderr
    assert "applied migrations" in release.stdout, release.stdout
    log_path = tmp / "honcho.log"
    with open(log_path, "w") as log:
        honcho = subprocess.Popen(
            _honcho(
                "-e",
                str(env_file),
                "start",
                "-p",
                str(base_port),
                "-c",
                "web=2,worker=2",
                "web",
                "worker",
            ),
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    running = Platform(web_urls, env, database_url, redis_server_url, namespace, honcho, log_path)
    try:
        _wait_until_up(running)
        yield running
    finally:
        if honcho.poll() is None:
            os.killpg(honcho.pid, signal.SIGKILL)  # only when a test failed before the clean stop
            honcho.wait(10)
        for pid in _process_ids(running.log()):
            _kill_group(pid)
        clear_queue()
        keys.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
            )


def _process_ids(log: str) -> list[int]:
    return [int(pid) for pid in re.findall(r"\| (?:web|worker)\.\d+ started \(pid=(\d+)\)", log)]


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _group_alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True


@asynccontextmanager
async def _client(url: str, token: str, **headers: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}", **headers}, timeout=90)
    async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
        yield client


async def _call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert result.is_error is False, result.structured_content
    assert result.structured_content is not None
    return result.structured_content


def test_release_migrated_the_platform_database(platform: Platform) -> None:
    with psycopg.connect(platform.database_url) as conn:
        versions = [
            row[0] for row in conn.execute("SELECT version FROM schema_version ORDER BY version")
        ]
    assert versions == [m.version for m in available_migrations()]
    # Every uvicorn worker of both web processes built its own runtime from the environment.
    assert len(re.findall(_WEB_STARTED, platform.log())) == 2 * WEB_CONCURRENCY


def test_a_console_search_never_reaches_the_platform_log(platform: Platform) -> None:
    # uvicorn's own access log would print the path with its query: a console search's
    # text (?q=...) is the owner's, and the request log keeps the path only.
    with httpx.Client(base_url=platform.web_urls[0], timeout=30) as http:
        answer = http.get("/console/memories?q=my-secret-search-words")
    assert answer.status_code == 303  # signed out: to the sign-in page
    assert "my-secret-search-words" not in platform.log()


async def test_a_write_through_one_web_process_is_read_through_the_other(
    platform: Platform,
) -> None:
    token = platform.token()
    first, second = platform.web_urls
    async with _client(first, token) as one, _client(second, token) as two:
        stored = await _call(
            one, "remember", {"text": "My sister Ines lives in Porto.", "tags": ["family"]}
        )
        found = await _call(two, "recall", {"query": "where does my sister live", "limit": 3})
        assert found["matches"][0]["id"] == stored["memory_id"]
        assert found["matches"][0]["text"] == "My sister Ines lives in Porto."

        other = await _call(two, "remember", {"text": "I cycle to work on Tuesdays."})
        fetched = await _call(one, "get_memory", {"id": other["memory_id"]})
        assert fetched["memory"]["text"] == "I cycle to work on Tuesdays."
    assert [text for _, text in platform.rows("My sister Ines")] == [
        "My sister Ines lives in Porto."
    ]
    assert [text for _, text in platform.rows("I cycle to work")] == [
        "I cycle to work on Tuesdays."
    ]


async def test_a_retried_write_lands_once_even_through_the_other_web_process(
    platform: Platform,
) -> None:
    token = platform.token()
    first, second = platform.web_urls
    args = {"text": "My passport expires in March 2031.", "tags": ["documents"]}
    async with _client(first, token, **{"Idempotency-Key": "passport-1"}) as one:
        original = await _call(one, "remember", args)
    # The client timed out and retries; the platform's router sends it to the other process.
    async with _client(second, token, **{"Idempotency-Key": "passport-1"}) as two:
        retried = await _call(two, "remember", args)
    assert retried == original  # the first answer, not "Already remembered"
    async with _client(second, token) as fresh:
        again = await _call(fresh, "remember", args)
    assert again["memory_id"] == original["memory_id"] and again != original
    assert [row_id for row_id, _ in platform.rows("My passport")] == [original["memory_id"]]


async def test_concurrent_batches_are_shared_by_both_workers_and_stored_once(
    platform: Platform,
) -> None:
    token = platform.token()
    batches = [
        [
            {
                "text": f"Receipt {b}-{i}: Aunt Mila paid {b * 100 + i} euros, {_FILLER}",
                "dedup_policy": "insert",
            }
            for i in range(25)
        ]
        for b in range(8)
    ]
    seen_workers: set[str] = set()
    done = asyncio.Event()

    async def watch_workers() -> None:
        # A worker holding a message has it in its own "acks" set until it finishes.
        client = aredis.Redis.from_url(platform.redis_url)
        try:
            while not done.is_set():
                async for key in client.scan_iter(
                    match=f"{platform.namespace}:__acks__.*.{WRITE_QUEUE}"
                ):
                    if await client.scard(key) > 0:
                        seen_workers.add(key.decode().split(".")[1])
                await asyncio.sleep(0.005)
        finally:
            await client.aclose()

    watcher = asyncio.create_task(watch_workers())
    try:
        async with (
            _client(platform.web_urls[0], token) as one,
            _client(platform.web_urls[1], token) as two,
        ):
            results = await asyncio.gather(
                *(
                    _call((one, two)[b % 2], "remember_batch", {"items": items})
                    for b, items in enumerate(batches)
                )
            )
    finally:
        done.set()
        await watcher
    assert [r["summary"] for r in results] == [{"total": 25, "succeeded": 25, "failed": 0}] * 8
    rows = platform.rows("Receipt ")
    assert sorted(text for _, text in rows) == sorted(
        item["text"] for items in batches for item in items
    )
    assert sorted(r["memory_id"] for result in results for r in result["results"]) == [
        i for i, _ in rows
    ]
    assert len(seen_workers) == 2, f"only {seen_workers} took batches"


def test_the_web_line_ignores_forwarded_headers_unless_configured(platform: Platform) -> None:
    """uvicorn alone believes X-Forwarded-For from 127.0.0.1; the Procfile's web line does not."""
    failed_sign_in(platform.web_urls[0], "203.0.113.77")
    with psycopg.connect(platform.database_url) as conn:
        addresses = [row[0] for row in conn.execute("SELECT address FROM oauth_login_failures")]
    assert addresses == ["127.0.0.1"]


def test_honcho_stops_every_process_cleanly(platform: Platform) -> None:
    pids = _process_ids(platform.log())
    assert len(pids) == 4
    platform.honcho.send_signal(signal.SIGTERM)
    platform.honcho.wait(60)
    log = platform.log()
    # honcho waits for each process's shell; the program itself may take a moment longer to exit.
    deadline = time.monotonic() + 15
    while any(_group_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in pids if _group_alive(pid)], log
    stopped = re.findall(r"\| ((?:web|worker)\.\d+) stopped \(rc=(-?\d+)\)", log)
    assert sorted(name for name, _ in stopped) == ["web.1", "web.2", "worker.1", "worker.2"], log
    assert "SIGKILL" not in log  # everything stopped within honcho's grace period
    assert "OwnSona worker running" in log and "Traceback" not in log, log


async def test_web_processes_starting_together_on_a_fresh_database_migrate_once(dsn: str) -> None:
    """Two web processes (or a web process and ``release``) may migrate at the same moment."""
    database = f"ownsona_migrate_race_{os.getpid()}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    try:
        url = _database_url(dsn, database)
        applied = await asyncio.gather(
            *(migrate(url, dimensions=TEST_DIMENSIONS) for _ in range(4))
        )
        everything = [m.version for m in available_migrations()]
        assert sorted(v for versions in applied for v in versions) == everything
        with psycopg.connect(url) as conn:
            rows = conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
        assert [row[0] for row in rows] == everything
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(database)))


def test_worker_processes_runs_that_many_workers_and_stops_them_on_sigterm(
    dsn: str, redis_server_url: str
) -> None:
    """``WORKER_PROCESSES=2``: a container signals only its first process, which stops the rest."""
    namespace = f"ownsona-worker-processes-{os.getpid()}"
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("WORKER_", "DATABASE_", "REDIS_"))
        },
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONUNBUFFERED": "1",
        "DATABASE_URL": _database_url(dsn, psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]),
        "REDIS_URL": redis_server_url,
        "QUEUE_NAMESPACE": namespace,
        "WORKER_PROCESSES": "2",
        "WORKER_THREADS": "1",
    }
    bad = subprocess.run(
        ["ownsona", "worker"],
        env={**env, "WORKER_PROCESSES": "two"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "WORKER_PROCESSES" in bad.stderr, bad.stderr

    client = redis.Redis.from_url(redis_server_url)
    parent = subprocess.Popen(
        shlex.split(_procfile_entry("worker")),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert parent.stdout is not None
        deadline, started = time.monotonic() + 90, 0
        while started < 2 and time.monotonic() < deadline:
            line = parent.stdout.readline()
            if not line and parent.poll() is not None:
                break
            started += "OwnSona worker running" in line
        assert started == 2
        # Each process is a consumer of its own: Redis holds one heartbeat per worker.
        assert client.zcard(f"{namespace}:__heartbeats__") == 2
        children = [
            int(pid)
            for pid in subprocess.run(
                ["ps", "-o", "pid=", "--ppid", str(parent.pid)], capture_output=True, text=True
            ).stdout.split()
        ]
        assert len(children) == 2
        parent.send_signal(signal.SIGTERM)  # the parent only, as `docker stop` does
        assert parent.wait(40) == 0
        assert not [pid for pid in children if _alive(pid)]
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)
        if parent.stdout is not None:
            parent.stdout.close()
        delete_namespace(client, namespace)
        client.close()


def _procfile_entry(name: str) -> str:
    for line in (ROOT / "Procfile").read_text().splitlines():
        entry, _, command = line.partition(":")
        if entry == name:
            return command.strip()
    raise AssertionError(f"the Procfile has no {name!r} entry")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
