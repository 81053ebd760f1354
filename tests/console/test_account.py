"""The account page: password, sign-ins, export and import of this account's memories."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import falcon.testing
import psycopg
import pytest

from api.console.jobs import Jobs
from api.runtime import Runtime
from auth.cli_tokens import mint_cli_token
from auth.tokens import issue_access_token
from memory.backup import export_store
from tests.api.conftest import Mcp
from tests.console.conftest import PASSWORD, Browser, make_account, operation_key

NEW_PASSWORD = "a much longer new secret"


def _mcp_for(conductor: falcon.testing.ASGIConductor, runtime: Runtime, user_id: int) -> Mcp:
    token = issue_access_token(
        runtime.keystore,
        runtime.settings,
        user_id=user_id,
        client_id="test-assistant",
        scope="memory:read memory:write",
    )
    return Mcp(conductor, token)


async def _count(mcp: Mcp) -> int:
    out = await mcp.call_tool("count_memories", {})
    return int(out["structuredContent"]["count"])


async def _signs_in(conductor: falcon.testing.ASGIConductor, password: str) -> bool:
    other = Browser(conductor)
    await other.get("/console/sign-in")
    result = await other.post("/console/sign-in", {"username": "alice", "password": password})
    return result.status_code == 303


async def _mcp_status(mcp: Mcp) -> int:
    result = await mcp.request("tools/call", {"name": "count_memories", "arguments": {}})
    return result.status_code


def _change(current: str, new: str = NEW_PASSWORD, repeat: str | None = None) -> dict[str, str]:
    return {
        "current_password": current,
        "new_password": new,
        "repeat_password": new if repeat is None else repeat,
    }


async def _finish_jobs(browser: Browser) -> None:
    """Wait for the console's background jobs to end."""
    assert browser.jobs is not None
    await browser.jobs.wait_all()


async def _job(browser: Browser, location: str) -> dict[str, Any]:
    assert location.startswith("/console/jobs/"), location
    await _finish_jobs(browser)
    result = await browser.get(location, Accept="application/json")
    assert result.status_code == 200
    return result.json  # type: ignore[no-any-return]


# --- password ------------------------------------------------------------------------


async def test_a_wrong_current_password_is_refused_and_changes_nothing(
    browser: Browser, owner_mcp: Mcp, conductor: falcon.testing.ASGIConductor
) -> None:
    result = await browser.post("/console/account/password", _change("not my password"))
    assert result.status_code == 400
    assert "current password is not right" in result.text and 'role="alert"' in result.text
    mismatch = await browser.post(
        "/console/account/password", _change(PASSWORD, repeat="something else")
    )
    assert mismatch.status_code == 400 and "not the same" in mismatch.text
    short = await browser.post("/console/account/password", _change(PASSWORD, "short"))
    assert short.status_code == 400 and "8 to 1024 characters" in short.text
    assert await _mcp_status(owner_mcp) == 200
    assert await _signs_in(conductor, PASSWORD)


async def test_wrong_current_passwords_count_against_the_sign_in_throttle(
    browser: Browser, conductor: falcon.testing.ASGIConductor
) -> None:
    for _ in range(5):  # the free failures of a username (ThrottlePolicy.free_per_username)
        result = await browser.post("/console/account/password", _change("guess"))
        assert result.status_code == 400
    throttled = await browser.post("/console/account/password", _change(PASSWORD))
    assert throttled.status_code == 429 and "Too many attempts" in throttled.text
    assert int(throttled.headers["retry-after"]) >= 1
    other = Browser(conductor)
    await other.get("/console/sign-in")
    sign_in = await other.post("/console/sign-in", {"username": "alice", "password": PASSWORD})
    assert sign_in.status_code == 429  # one budget for both forms


async def test_a_new_password_ends_every_other_way_in_but_this_browser(
    browser: Browser,
    owner_mcp: Mcp,
    conductor: falcon.testing.ASGIConductor,
    console_runtime: Runtime,
) -> None:
    other = Browser(conductor)
    await other.sign_in("alice")
    cli = await mint_cli_token(
        console_runtime.deps.pool,
        console_runtime.settings,
        username="alice",
        scope="memory:read memory:write",
        ttl_s=None,
        label="laptop",
    )
    cli_mcp = Mcp(conductor, cli)
    assert await _mcp_status(cli_mcp) == 200 and await _mcp_status(owner_mcp) == 200

    result = await browser.post("/console/account/password", _change(PASSWORD))
    assert result.status_code == 303
    assert result.headers["location"] == "/console/account?notice=account-password-changed"
    page = await browser.get(result.headers["location"])
    assert page.status_code == 200 and "Your password is changed" in page.text
    assert (await other.get("/console/account")).status_code == 303  # signed out
    assert await _mcp_status(owner_mcp) == 401
    assert await _mcp_status(cli_mcp) == 401
    assert not await _signs_in(conductor, PASSWORD)
    assert await _signs_in(conductor, NEW_PASSWORD)


async def test_sign_out_everywhere_ends_this_and_other_sessions_but_not_apps(
    browser: Browser, owner_mcp: Mcp, conductor: falcon.testing.ASGIConductor
) -> None:
    other = Browser(conductor)
    await other.sign_in("alice")
    page = await browser.get("/console/account")
    assert "does not disconnect" in page.text
    result = await browser.post("/console/account/sign-out-everywhere")
    assert result.status_code == 303
    assert result.headers["location"].startswith("/console/sign-in?notice=")
    notice = await browser.get(result.headers["location"])
    assert "signed out of every browser" in notice.text
    assert (await browser.get("/console/account")).status_code == 303
    assert (await other.get("/console/account")).status_code == 303
    assert await _mcp_status(owner_mcp) == 200  # the apps page disconnects apps, not this


# --- export and import -------------------------------------------------------------


async def _export(browser: Browser) -> falcon.testing.Result:
    await browser.get("/console/account")
    return await browser.post("/console/account/export")


async def test_export_downloads_this_user_s_memories_only(
    browser: Browser,
    owner_mcp: Mcp,
    conductor: falcon.testing.ASGIConductor,
    console_runtime: Runtime,
    clean_db: str,
    owner: int,
) -> None:
    await owner_mcp.call_tool("remember", {"text": "My sister Ana lives in Porto."})
    bob = make_account(clean_db, "bob")
    await _mcp_for(conductor, console_runtime, bob).call_tool(
        "remember", {"text": "Bob keeps bees on the roof."}
    )
    result = await _export(browser)
    assert result.status_code == 200
    today = datetime.now(UTC).date()
    assert result.headers["content-disposition"].startswith("attachment;")
    assert f"ownsona-export-alice-{today}.jsonl" in result.headers["content-disposition"]
    assert result.headers["content-type"].startswith("application/jsonl")
    lines = result.text.splitlines()
    header, records = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
    assert [u["username"] for u in header["users"]] == ["alice"]
    assert [r["text"] for r in records] == ["My sister Ana lives in Porto."]
    assert "bees" not in result.text

    assert console_runtime.audit is not None
    await console_runtime.audit.flush()
    with psycopg.connect(clean_db) as conn:
        rows = conn.execute(
            "SELECT user_id, entry, client_id, ok FROM audit_events WHERE tool = 'export'"
        ).fetchall()
    assert rows == [(owner, "console", "ownsona-console", True)]


@pytest.fixture
async def exported(browser: Browser, owner_mcp: Mcp) -> bytes:
    """Alice's export of two memories, one of them with relations."""
    await owner_mcp.call_tool("remember", {"text": "My sister Ana lives in Porto."})
    await owner_mcp.call_tool("remember", {"text": "I take my coffee black."})
    result = await _export(browser)
    assert result.status_code == 200
    return result.content


async def _bob(
    conductor: falcon.testing.ASGIConductor, clean_db: str, jobs: Jobs | None = None
) -> Browser:
    make_account(clean_db, "bob")
    bob = Browser(conductor, jobs)
    await bob.sign_in("bob")
    return bob


async def test_import_restores_an_export_into_this_account_as_a_job(
    exported: bytes,
    owner_mcp: Mcp,
    conductor: falcon.testing.ASGIConductor,
    console_runtime: Runtime,
    clean_db: str,
    console_jobs: Jobs,
) -> None:
    bob = await _bob(conductor, clean_db, console_jobs)
    bob_mcp = _mcp_for(conductor, console_runtime, _user_id(clean_db, "bob"))
    page = await bob.get("/console/account")
    assert 'enctype="multipart/form-data"' in page.text
    first = await bob.post_multipart(
        "/console/account/import", {}, files={"file": ("alice.jsonl", exported)}
    )
    assert first.status_code == 303
    job = await _job(bob, first.headers["location"])
    assert job["state"] == "done" and job["percent"] == 100
    assert job["done"] == job["total"] == 2
    assert job["result"]["inserted"] == 2 and "Stored 2 memories" in job["message"]
    shown = await bob.get(first.headers["location"])
    assert "Done." in shown.text and "Stored 2 memories" in shown.text
    listed = await bob_mcp.call_tool("list_memories", {})
    texts = sorted(m["text"] for m in listed["structuredContent"]["memories"])
    assert texts == ["I take my coffee black.", "My sister Ana lives in Porto."]
    assert await _count(owner_mcp) == 2  # nothing went into the account the file names

    again = await bob.post_multipart(
        "/console/account/import", {}, files={"file": ("alice.jsonl", exported)}
    )
    second = await _job(bob, again.headers["location"])
    assert second["state"] == "done"
    assert second["result"]["inserted"] == 0 and second["result"]["already_present"] == 2
    assert await _count(bob_mcp) == 2

    assert console_runtime.audit is not None
    await console_runtime.audit.flush()
    with psycopg.connect(clean_db) as conn:
        rows = conn.execute(
            "SELECT entry, client_id, ok FROM audit_events WHERE tool = 'import' ORDER BY id"
        ).fetchall()
    assert rows == [("console", "ownsona-console", True)] * 2


def _user_id(dsn: str, username: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT id FROM users WHERE username = %s", (username,)).fetchone()
    assert row is not None
    return int(row[0])


async def test_a_double_submitted_import_form_is_one_job(
    exported: bytes, conductor: falcon.testing.ASGIConductor, clean_db: str, console_jobs: Jobs
) -> None:
    bob = await _bob(conductor, clean_db, console_jobs)
    key = operation_key((await bob.get("/console/account")).text)
    sent = [
        await bob.post_multipart(
            "/console/account/import", {"operation": key}, files={"file": ("a.jsonl", exported)}
        )
        for _ in range(2)
    ]
    assert sent[0].headers["location"] == sent[1].headers["location"]
    job = await _job(bob, sent[0].headers["location"])
    assert job["result"]["inserted"] == 2


async def test_a_bad_file_is_refused_clearly_and_changes_nothing(
    exported: bytes,
    owner_mcp: Mcp,
    conductor: falcon.testing.ASGIConductor,
    console_runtime: Runtime,
    clean_db: str,
    console_jobs: Jobs,
) -> None:
    bob = await _bob(conductor, clean_db, console_jobs)
    bob_mcp = _mcp_for(conductor, console_runtime, _user_id(clean_db, "bob"))
    truncated = b"\n".join(exported.splitlines()[:-1]) + b"\n"
    everyone: list[str] = []
    await export_store(
        console_runtime.deps.pool, everyone.append, keyring=console_runtime.deps.keyring
    )
    lines = exported.splitlines()
    header = json.loads(lines[0])
    header["max_memory_id"] = 2**62
    huge = b"\n".join([json.dumps(header).encode(), *lines[1:]]) + b"\n"
    cases = [
        (huge, "memory ids above"),
        (b"this is not an export\n", "line 1"),
        (truncated, "truncated"),
        ("".join(everyone).encode(), "2 accounts"),
        (b"", "Choose an export file"),
    ]
    for data, said in cases:
        result = await bob.post_multipart(
            "/console/account/import", {}, files={"file": ("bad.jsonl", data)}
        )
        assert result.status_code == 400, said
        assert 'role="alert"' in result.text and said in result.text, said
    assert await _count(bob_mcp) == 0
    assert await _count(owner_mcp) == 2


async def test_every_post_without_the_csrf_token_is_refused_and_changes_nothing(
    browser: Browser, owner_mcp: Mcp, conductor: falcon.testing.ASGIConductor
) -> None:
    for path, fields in (
        ("/console/account/password", _change(PASSWORD)),
        ("/console/account/sign-out-everywhere", {}),
        ("/console/account/export", {}),
        ("/console/account/import", {}),
    ):
        result = await browser.post(path, fields, csrf=False)
        assert result.status_code == 403, path
        assert "content-disposition" not in result.headers, path
    assert (await browser.get("/console/account")).status_code == 200  # still signed in
    assert await _mcp_status(owner_mcp) == 200
    assert await _signs_in(conductor, PASSWORD)
