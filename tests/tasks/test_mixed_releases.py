"""Two releases on one queue, as real processes: the rolling upgrade's middle.

- This release's web side (its write queue and extraction hook) against a
  worker process of the previous release (a git worktree of its commit):
  the order the upgrade guide does not ask for, which must still not lose or
  fail a write between these two releases.
- A worker process of this release, fed the messages the previous releases'
  web processes queued (tests/fixtures/queue_messages), over real Redis.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import dramatiq
import psycopg
import pytest
from psycopg import sql

from config.settings import Settings
from storage.migrate import migrate
from tasks.actors import declare_actors, extraction_hook
from tasks.broker import make_broker
from tasks.queue import DramatiqWriteQueue
from tests.conftest import QUEUE_NAMESPACE, make_user
from tests.record_queue_messages import USER_ID
from tests.tool_calls import meta_for, parse_command

HERE = Path(__file__).resolve().parents[2]
#: The release before this one (its fixtures are the newest in tests/fixtures/queue_messages).
PREVIOUS_RELEASE = "6540e3c"
FIXTURES = HERE / "tests" / "fixtures" / "queue_messages"
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture(scope="module")
def previous_checkout() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ownsona-release-")) / PREVIOUS_RELEASE
    added = subprocess.run(
        ["git", "-C", str(HERE), "worktree", "add", "--detach", str(path), PREVIOUS_RELEASE],
        capture_output=True,
        text=True,
    )
    if added.returncode != 0:
        pytest.skip(f"no checkout of {PREVIOUS_RELEASE}: {added.stderr.strip()}")
    yield path
    subprocess.run(["git", "-C", str(HERE), "worktree", "remove", "--force", str(path)])
    shutil.rmtree(path.parent, ignore_errors=True)


@pytest.fixture
def database(dsn: str, previous_checkout: Path) -> Iterator[str]:
    """A database at the previous release's schema: what its worker accepts."""
    latest = max(
        int(p.name[:4]) for p in (previous_checkout / "storage" / "migrations").glob("[0-9]*.sql")
    )
    name = f"mixed_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = dsn.replace("/ownsona_test", f"/{name}")
    asyncio.run(migrate(url, dimensions=384, up_to=latest))
    yield url
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _start_worker(checkout: Path, dsn: str, redis_url: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "DATABASE_URL": dsn,
        "REDIS_URL": redis_url,
        "QUEUE_NAMESPACE": QUEUE_NAMESPACE,
        "PYTHONPATH": str(checkout),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "scripts.cli", "worker", "--threads", "2"],
        cwd=checkout,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 120
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "worker running" in line:
            return proc
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"the worker of {checkout.name} did not start")


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        proc.wait(30)
    assert proc.stdout is not None
    proc.stdout.close()


def _one(dsn: str, query: str, *args: object) -> object:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(query, args).fetchone()
    assert row is not None
    return row[0]


async def test_this_releases_writes_run_on_a_worker_of_the_previous_release(
    previous_checkout, database, redis_url
):
    user = make_user(database, "mixed")
    worker = _start_worker(previous_checkout, database, redis_url)
    bundle = make_broker(redis_url, namespace=QUEUE_NAMESPACE)
    actors = declare_actors(bundle.broker)
    queue = DramatiqWriteQueue(bundle, actors, timeout_s=60)
    settings = Settings()
    try:
        text = "My sister Ana lives in Porto."
        stored = await queue.submit(
            meta_for(user, "mixed-1"), parse_command("remember", {"text": text}, settings)
        )
        assert stored["ok"] is True and stored["message"] == "Ok", stored
        memory_id = stored["memory_id"]
        again = await queue.submit(
            meta_for(user, "mixed-1"), parse_command("remember", {"text": text}, settings)
        )
        assert again == stored
        gone = await queue.submit(
            meta_for(user, "mixed-2"), parse_command("forget", {"id": memory_id}, settings)
        )
        assert gone["ok"] is True, gone
        # The extraction job this release's hook sends (its arguments unchanged since then).
        extraction_hook(actors)(user, [memory_id])
        deadline = time.monotonic() + 60
        edges = "SELECT count(*) FROM memory_relations WHERE memory_id = %s"
        while _one(database, edges, memory_id) == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert _one(database, edges, memory_id) != 0
    finally:
        await queue.aclose()
        bundle.broker.close()
        _stop(worker)
    assert _one(database, "SELECT count(*) FROM memories WHERE user_id = %s", user) == 1


async def test_a_worker_process_of_this_release_runs_the_previous_releases_messages(
    clean_db, redis_url
):
    user = make_user(clean_db, "replayed")
    worker = _start_worker(HERE, clean_db, redis_url)
    bundle = make_broker(redis_url, namespace=QUEUE_NAMESPACE)
    try:
        for release in sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()):
            data = json.loads((FIXTURES / release / "remember_batch.json").read_text("utf-8"))
            data["message_id"] = str(uuid.uuid4())
            raw = json.dumps(data).replace(str(USER_ID), str(user))
            message: dramatiq.Message[object] = dramatiq.Message(**json.loads(raw))
            bundle.broker.enqueue(message)
            payload = bundle.backend.get_result(message, block=True, timeout=60_000)
            assert payload["ok"] is True, (release, payload)
            assert payload["summary"]["succeeded"] == 2, (release, payload)
    finally:
        bundle.broker.close()
        _stop(worker)
    # Every recording sends its batch under the same key: the later ones are answered from
    # the first one's receipt, whichever release queued them, and store nothing again.
    count = "SELECT count(*) FROM memories WHERE user_id = %s"
    assert _one(clean_db, count, user) == 2
