"""/console/activity: the audit log of the owner's calls, filtered and paged."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from api.runtime import Runtime
from auth.cli_tokens import mint_cli_token
from config.settings import Settings
from memory.audit import AuditLog
from storage import audit as store
from tests.api.conftest import Mcp
from tests.console.conftest import Browser, make_account

REPO = Path(__file__).resolve().parents[2]
SECRET = "The spare key is taped under the third flowerpot."


def body_rows(html: str) -> list[str]:
    """The activity table's rows, newest first."""
    tbody = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0] if "<tbody>" in html else ""
    return re.findall(r"<tr>(.*?)</tr>", tbody, flags=re.S)


def tools_of(html: str) -> list[str]:
    return [re.findall(r"<code>([^<]+)</code>", row)[0] for row in body_rows(html)]


async def test_a_call_shows_its_tool_app_entry_and_memory_links(
    browser: Browser, owner_mcp: Mcp
) -> None:
    stored = await owner_mcp.call_tool("remember", {"text": SECRET})
    memory_id = stored["structuredContent"]["memory_id"]
    await owner_mcp.call_tool("get_memory", {"id": memory_id})
    await owner_mcp.call_tool("get_memory", {"id": memory_id + 1000})

    page = await browser.get("/console/activity")
    assert page.status_code == 200
    rows = body_rows(page.text)
    assert tools_of(page.text) == ["get_memory", "get_memory", "remember"]
    missing, read, remember = rows
    assert "test-assistant" in remember and "MCP (HTTP)" in remember
    link = f'href="/console/memories/{memory_id}"'
    assert link in remember and link in read
    assert "NOT_FOUND" in missing and "NOT_FOUND" not in read
    assert re.search(r"<td>ok</td>", read)
    assert re.search(r"\d+(\.\d)? ms", read)
    assert "flowerpot" not in page.text and "spare key" not in page.text


async def test_filters_by_app_tool_and_memory(
    browser: Browser, owner_mcp: Mcp, pool: Any, console_settings: Settings, conductor: Any
) -> None:
    first = await owner_mcp.call_tool("remember", {"text": "I am allergic to penicillin."})
    second = await owner_mcp.call_tool("remember", {"text": "My bike is a green Brompton."})
    first_id = first["structuredContent"]["memory_id"]
    second_id = second["structuredContent"]["memory_id"]
    token = await mint_cli_token(
        pool, console_settings, username="alice", scope="memory:read", ttl_s=None, label="cron"
    )
    await Mcp(conductor, token).call_tool("count_memories", {})
    await owner_mcp.call_tool("get_memory", {"id": second_id})

    page = (await browser.get("/console/activity")).text
    assert '<option value="ownsona-cli">CLI token</option>' in page
    assert '<option value="count_memories">count_memories</option>' in page

    by_tool = (await browser.get("/console/activity?tool=remember")).text
    assert tools_of(by_tool) == ["remember", "remember"]
    assert '<option value="remember" selected>' in by_tool

    by_app = (await browser.get("/console/activity?app=ownsona-cli")).text
    assert tools_of(by_app) == ["count_memories"]
    assert "CLI token" in body_rows(by_app)[0]
    others = (await browser.get("/console/activity?app=test-assistant")).text
    assert "count_memories" not in tools_of(others) and len(tools_of(others)) == 3

    by_memory = (await browser.get(f"/console/activity?memory={second_id}")).text
    assert tools_of(by_memory) == ["get_memory", "remember"]
    assert all(f'/console/memories/{first_id}"' not in row for row in body_rows(by_memory))

    nothing = await browser.get("/console/activity?tool=forget")
    assert body_rows(nothing.text) == [] and "No call matches these filters." in nothing.text
    bad = await browser.get("/console/activity?memory=abc")
    assert bad.status_code == 400


async def test_pages_go_back_without_gaps_or_repeats(
    browser: Browser, console_runtime: Runtime, owner: int
) -> None:
    log = console_runtime.audit
    assert log is not None
    for n in range(1, 58):  # 57 calls, each naming its own memory id
        log.record(
            user_id=owner,
            entry="mcp",
            client_id="test-assistant",
            token_jti=None,
            tool="get_memory",
            read_only=True,
            arguments={"id": n},
            payload={"ok": True, "memory": {"id": n}},
            duration_s=0.001,
        )
    first = (await browser.get("/console/activity")).text
    ids = [int(m) for m in re.findall(r"/console/memories/(\d+)\"", first)]
    assert ids == list(range(57, 7, -1))  # the newest 50
    older = re.search(r'href="([^"]+)" rel="next">Older calls', first)
    assert older, "no link to the older calls"
    second = (await browser.get(older.group(1).replace("&amp;", "&"))).text
    ids = [int(m) for m in re.findall(r"/console/memories/(\d+)\"", second)]
    assert ids == list(range(7, 0, -1))
    assert "Older calls" not in second and ">Newest</a>" in second


async def test_another_accounts_calls_are_not_shown(
    browser: Browser, console_runtime: Runtime, clean_db: str
) -> None:
    bob = make_account(clean_db, "bob")
    assert console_runtime.audit is not None
    console_runtime.audit.record(
        user_id=bob,
        entry="mcp",
        client_id="bobs-assistant",
        token_jti=None,
        tool="recall",
        read_only=True,
        arguments={"query": "x"},
        payload={"ok": True, "matches": [{"id": 4242}]},
        duration_s=0.002,
    )
    page = (await browser.get("/console/activity")).text
    assert "bobs-assistant" not in page and "4242" not in page
    assert "No calls on record yet." in page


async def test_query_text_shows_only_when_recorded(
    browser: Browser, pool: Any, owner: int, owner_mcp: Mcp
) -> None:
    await owner_mcp.call_tool("recall", {"query": "what is my favourite tea"})
    page = (await browser.get("/console/activity")).text
    assert "favourite tea" not in page and '<th scope="col">Query</th>' not in page

    recording = AuditLog(
        pool, Settings(public_url="http://127.0.0.1:8000", audit_record_queries=True)
    )
    recording.record(
        user_id=owner,
        entry="stdio",
        client_id=None,
        token_jti=None,
        tool="recall",
        read_only=True,
        arguments={"query": "which <b>bakery</b> do I like"},
        payload={"ok": True, "matches": []},
        duration_s=0.003,
    )
    await recording.close()
    page = (await browser.get("/console/activity")).text
    assert '<th scope="col">Query</th>' in page
    assert "which &lt;b&gt;bakery&lt;/b&gt; do I like" in page  # escaped, never markup
    assert "favourite tea" not in page
    assert "MCP (stdio)" in page


async def test_the_log_never_holds_memory_text(
    owner_mcp: Mcp, console_runtime: Runtime, clean_db: str
) -> None:
    stored = await owner_mcp.call_tool("remember", {"text": SECRET, "tags": ["house"]})
    memory_id = stored["structuredContent"]["memory_id"]
    await owner_mcp.call_tool(
        "update_memory", {"id": memory_id, "text": SECRET.replace("third", "fourth")}
    )
    await owner_mcp.call_tool("search_memory", {"query": "spare key flowerpot"})
    await owner_mcp.call_tool("list_memories", {})
    assert console_runtime.audit is not None
    await console_runtime.audit.flush()
    with psycopg.connect(clean_db) as conn:
        rows = [r[0] for r in conn.execute("SELECT row_to_json(a)::text FROM audit_events a")]
    assert len(rows) == 4
    for row in rows:
        for word in ("spare", "flowerpot", "taped", "house"):
            assert word not in row, row


async def test_prune_removes_records_older_than_the_retention(
    pool: Any, owner: int, console_settings: Settings, clean_db: str
) -> None:
    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    days = console_settings.audit_retention_days

    def event(at: datetime, tool: str) -> store.NewAuditEvent:
        return store.NewAuditEvent(
            user_id=owner,
            at=at,
            entry="mcp",
            client_id="a",
            token_jti=None,
            tool=tool,
            ok=True,
            error_code=None,
            read_ids=[],
            changed_ids=[],
            query=None,
            duration_ms=1.0,
        )

    async with pool.connection() as conn:
        await store.insert_events(
            conn,
            [
                event(now - timedelta(days=days, minutes=1), "too_old"),
                event(now - timedelta(days=days) + timedelta(minutes=1), "just_kept"),
                event(now - timedelta(days=1), "recent"),
            ],
        )
    log = AuditLog(pool, console_settings)
    assert await log.prune(now=now) == 1
    assert await log.prune(now=now) == 0
    with psycopg.connect(clean_db) as conn:
        kept = [r[0] for r in conn.execute("SELECT tool FROM audit_events ORDER BY at")]
    assert kept == ["just_kept", "recent"]


def ownsona(dsn: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The real ``ownsona`` command, on the test database."""
    return subprocess.run(
        [sys.executable, "-m", "scripts.cli", *args],
        cwd=REPO,
        env={**os.environ, "DATABASE_URL": dsn, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_export_and_import_commands_are_on_record(
    browser: Browser, owner_mcp: Mcp, clean_db: str, tmp_path: Path
) -> None:
    make_account(clean_db, "bob")
    await owner_mcp.call_tool("remember", {"text": SECRET})
    backup = tmp_path / "alice.jsonl"
    done = await asyncio.to_thread(
        ownsona, clean_db, "export", "--user", "alice", "-o", str(backup)
    )
    assert done.returncode == 0, done.stderr
    done = await asyncio.to_thread(ownsona, clean_db, "import", str(backup), "--user", "alice")
    assert done.returncode == 0, done.stderr

    page = (await browser.get("/console/activity")).text
    assert tools_of(page) == ["ownsona import", "ownsona export", "remember"]
    for row in body_rows(page)[:2]:
        assert "ownsona command" in row and "Command line" in row and "<td>ok</td>" in row
    with psycopg.connect(clean_db) as conn:
        users = conn.execute(
            "SELECT DISTINCT u.username FROM audit_events a JOIN users u ON u.id = a.user_id"
        ).fetchall()
    assert users == [("alice",)]  # bob's memories were not exported: no record of his


async def test_a_relations_rebuild_is_on_record_for_its_account(
    browser: Browser, owner_mcp: Mcp, clean_db: str
) -> None:
    await owner_mcp.call_tool("remember", {"text": "My sister Ana lives in Porto."})
    done = await asyncio.to_thread(
        ownsona, clean_db, "relations", "rebuild", "--user", "alice", RELATION_EXTRACTOR="rules"
    )
    assert done.returncode == 0, done.stderr
    page = (await browser.get("/console/activity?app=ownsona-cli-command")).text
    assert tools_of(page) == ["ownsona relations rebuild"]
