"""Console jobs across web processes: a job, a confirm and a double submit reach any process.

A "web process" is an app of its own: its own pool, key store, runtime,
write queue and console jobs over the same database, as ``WEB_CONCURRENCY=2``
runs two (tests/api/test_sessions_shared.py does the same for MCP sessions).
The browser keeps its cookies from one to the other.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import falcon.testing
import psycopg
import pytest

from api.app import create_app
from api.console.jobs import Job, Jobs
from api.runtime import Runtime
from auth.bearer import BearerValidator
from auth.keys import KeyStore
from config.settings import Settings
from memory import console_jobs as console_jobs_use_cases
from memory.deps import Deps
from storage.pool import make_pool
from tests.api.conftest import Mcp
from tests.api.test_service_roundtrip import InlineWriteQueue
from tests.console.conftest import Browser, make_account, operation_key

FIXTURES = Path(__file__).parents[1] / "fixtures" / "chat_exports"
CHAT = "/console/account/import-chat"
_UPLOAD = re.compile(r'name="upload" value="([^"]+)"')


class OtherProcess:
    """The second web process: its conductor and its own console jobs."""

    def __init__(self, conductor: falcon.testing.ASGIConductor, jobs: Jobs) -> None:
        self.conductor = conductor
        self.jobs = jobs

    def browser(self, signed_in: Browser) -> Browser:
        """The same browser (its cookies) talking to this process."""
        other = Browser(self.conductor, self.jobs)
        other.cookies = signed_in.cookies  # one cookie jar: what either process sets, both see
        return other


@pytest.fixture
async def other(
    dsn: str, console_settings: Settings, embedder: Any, clean_db: str, run_keyring: Any
) -> AsyncIterator[OtherProcess]:
    pool = make_pool(dsn, min_size=1, max_size=4, name="another web process")
    await pool.open(wait=True)
    jobs = Jobs(pool)
    try:
        keystore = KeyStore(pool, access_token_ttl_s=console_settings.access_token_ttl_s)
        await keystore.load()
        # The deployment's master key, as every web process has it (a sealed run's).
        deps = Deps(settings=console_settings, pool=pool, embedder=embedder, keyring=run_keyring)
        runtime = Runtime(
            settings=console_settings,
            deps=deps,
            write_queue=InlineWriteQueue(deps),
            keystore=keystore,
            bearer=BearerValidator(keystore, console_settings),
        )
        app = create_app(console_settings, runtime=dataclasses.replace(runtime, console_jobs=jobs))
        async with falcon.testing.ASGIConductor(app) as conductor:
            yield OtherProcess(conductor, jobs)
        await jobs.close()
        if runtime.audit is not None:
            await runtime.audit.close()
    finally:
        await pool.close()


def job_rows(dsn: str) -> list[tuple[str, str, str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT id, kind, state FROM console_jobs ORDER BY created_at")
        return [(str(a), str(b), str(c)) for a, b, c in rows.fetchall()]


async def test_a_job_started_in_one_process_is_seen_in_another(
    browser: Browser, console_jobs: Jobs, other: OtherProcess, owner: int
) -> None:
    release = asyncio.Event()

    async def work(job: Job) -> None:
        job.progress(3, 10, "3 of 10 things.")
        await release.wait()
        job.result = {"things": 10}
        job.progress(10, message="10 things done.")

    job = await console_jobs.start(owner, "Test job", work)
    there = other.browser(browser)
    running = await there.get(f"/console/jobs/{job.id}", Accept="application/json")
    assert running.status_code == 200 and running.json["state"] == "running"
    page = await there.get(f"/console/jobs/{job.id}")
    assert page.status_code == 200 and "Working:" in page.text and "Test job" in page.text

    release.set()
    await console_jobs.wait(job)
    done = await there.get(f"/console/jobs/{job.id}", Accept="application/json")
    assert done.json == {
        "id": job.id,
        "kind": "Test job",
        "state": "done",
        "done": 10,
        "total": 10,
        "percent": 100,
        "message": "10 things done.",
        "result": {"things": 10},
    }
    assert "Done." in (await there.get(f"/console/jobs/{job.id}")).text


async def test_a_chat_import_uploaded_here_is_confirmed_there_once(
    browser: Browser, other: OtherProcess, owner_mcp: Mcp, clean_db: str
) -> None:
    await browser.get(CHAT)
    data = (FIXTURES / "claude_conversations.json").read_bytes()
    found = await browser.post_multipart(
        CHAT, {"step": "upload"}, files={"file": ("conversations.json", data)}
    )
    assert found.status_code == 200 and "Claude export" in found.text
    match = _UPLOAD.search(found.text)
    assert match
    fields = {
        "step": "confirm",
        "upload": match.group(1),
        "operation": operation_key(found.text),
        "mode": "messages",
    }
    there = other.browser(browser)
    confirmed = await there.post(CHAT, fields)
    assert confirmed.status_code == 303, confirmed.text
    job_page = confirmed.headers["location"]
    # The same confirm again, to the first process: the job the other one started.
    again = await browser.post(CHAT, fields)
    assert again.status_code == 303 and again.headers["location"] == job_page
    assert [kind for _, kind, _ in job_rows(clean_db)] == ["Import from Claude"]
    assert browser.jobs is not None and not browser.jobs._tasks  # nothing started here

    await other.jobs.wait_all()
    done = await browser.get(job_page)
    assert "Done." in done.text and "2 memories stored" in done.text
    assert (await owner_mcp.call_tool("count_memories", {}))["structuredContent"]["count"] == 2
    with psycopg.connect(clean_db) as conn:  # the parsed upload is gone once imported
        assert conn.execute("SELECT count(*) FROM console_uploads").fetchone() == (0,)


async def test_a_double_submitted_import_on_another_process_goes_to_the_first_job(
    browser: Browser,
    owner_mcp: Mcp,
    other: OtherProcess,
    conductor: falcon.testing.ASGIConductor,
    console_jobs: Jobs,
    clean_db: str,
) -> None:
    await owner_mcp.call_tool("remember", {"text": "My sister Ana lives in Porto."})
    exported = (await browser.post("/console/account/export")).content
    bob = Browser(conductor, console_jobs)
    make_account(clean_db, "bob")
    await bob.sign_in("bob")
    key = operation_key((await bob.get("/console/account")).text)
    form = {"operation": key}
    first = await bob.post_multipart(
        "/console/account/import", form, files={"file": ("a.jsonl", exported)}
    )
    assert first.status_code == 303
    second = await other.browser(bob).post_multipart(
        "/console/account/import", form, files={"file": ("a.jsonl", exported)}
    )
    assert second.status_code == 303
    assert second.headers["location"] == first.headers["location"]
    assert not other.jobs._tasks  # the other process started nothing
    await console_jobs.wait_all()
    assert [kind for _, kind, _ in job_rows(clean_db)] == ["Import"]
    job = await bob.get(first.headers["location"], Accept="application/json")
    assert job.json["state"] == "done" and job.json["result"]["inserted"] == 1


async def test_a_running_job_whose_process_died_reads_as_interrupted(
    browser: Browser, other: OtherProcess, owner: int, clean_db: str
) -> None:
    with psycopg.connect(clean_db, autocommit=True) as conn:
        # What a killed process leaves: running, its heartbeat three minutes old.
        conn.execute(
            "INSERT INTO console_jobs (id, user_id, kind, done, total, updated_at)"
            " VALUES ('dead-job', %s, 'Import', 4, 10, now() - interval '3 minutes')",
            (owner,),
        )
        conn.execute(
            "INSERT INTO console_jobs (id, user_id, kind, updated_at)"
            " VALUES ('live-job', %s, 'Import', now() - interval '20 seconds')",
            (owner,),
        )
    for there in (browser, other.browser(browser)):
        dead = await there.get("/console/jobs/dead-job", Accept="application/json")
        assert dead.json["state"] == "failed"
        assert dead.json["message"] == "Interrupted: the server restarted. Start it again."
        page = await there.get("/console/jobs/dead-job")
        assert "Failed." in page.text and "Interrupted: the server restarted" in page.text
        assert 'http-equiv="refresh"' not in page.text  # nothing to wait for
        live = await there.get("/console/jobs/live-job", Accept="application/json")
        assert live.json["state"] == "running"  # within its heartbeat window


async def test_another_users_job_is_not_found_on_any_process(
    browser: Browser, console_jobs: Jobs, other: OtherProcess, owner: int, clean_db: str
) -> None:
    async def work(job: Job) -> None:
        job.result = {"private": True}

    job = await console_jobs.start(owner, "Import", work)
    await console_jobs.wait(job)
    make_account(clean_db, "bob")
    bob = Browser(browser.conductor)
    await bob.sign_in("bob")
    for there in (bob, other.browser(bob)):
        assert (await there.get(f"/console/jobs/{job.id}")).status_code == 404
        answer = await there.get(f"/console/jobs/{job.id}", Accept="application/json")
        assert answer.status_code == 404 and "private" not in answer.text
        assert (await there.get("/console/jobs/no-such-job")).status_code == 404


async def test_a_job_stopped_by_a_shutdown_says_so(
    browser: Browser, console_jobs: Jobs, other: OtherProcess, owner: int
) -> None:
    never = asyncio.Event()

    async def work(job: Job) -> None:
        await never.wait()

    job = await console_jobs.start(owner, "Import", work)
    await console_jobs.close()
    answer = await other.browser(browser).get(f"/console/jobs/{job.id}", Accept="application/json")
    assert answer.json["state"] == "failed"
    assert answer.json["message"] == "Stopped: the server shut down. Start it again."


async def test_old_finished_jobs_and_expired_uploads_are_pruned_but_the_last_scan_stays(
    pool: Any, owner: int, clean_db: str
) -> None:
    with psycopg.connect(clean_db, autocommit=True) as conn:
        rows = [
            # id, subject, state, finished how long ago
            ("old-import", None, "done", "2 days"),
            ("new-import", None, "failed", "1 hour"),
            ("old-scan", "cleanup:duplicates:0.92", "done", "3 days"),
            ("last-scan", "cleanup:duplicates:0.92", "done", "2 days"),
            ("failed-scan", "cleanup:duplicates:0.92", "failed", "2 days"),
            ("only-scan", "cleanup:conflicts:0.80", "done", "5 days"),
        ]
        for job_id, subject, state, ago in rows:
            conn.execute(
                "INSERT INTO console_jobs (id, user_id, kind, subject, state, created_at,"
                " finished_at) VALUES (%s, %s, 'k', %s, %s, now() - %s::interval,"
                " now() - %s::interval)",
                (job_id, owner, subject, state, ago, ago),
            )
        conn.execute(
            "INSERT INTO console_uploads (id, user_id, filename, export, created_at) VALUES"
            " ('old', %s, 'a.json', '{}', now() - interval '2 hours'),"
            " ('new', %s, 'b.json', '{}', now())",
            (owner, owner),
        )
    removed = await console_jobs_use_cases.prune(
        pool, jobs_older_than_s=24 * 3600, uploads_older_than_s=3600
    )
    assert removed == (3, 1)
    with psycopg.connect(clean_db) as conn:
        left = sorted(r[0] for r in conn.execute("SELECT id FROM console_jobs"))
        uploads = [r[0] for r in conn.execute("SELECT id FROM console_uploads")]
    assert left == ["last-scan", "new-import", "only-scan"] and uploads == ["new"]
