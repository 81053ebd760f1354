"""Which app wrote a memory, on the memory itself: its page and the apps page say so after
the audit log has forgotten (migration 0014); a repeated Disconnect is done once."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import falcon.testing
import psycopg

from api.runtime import Runtime
from config.settings import Settings
from tests.api.conftest import Mcp
from tests.console.conftest import Browser, operation_key
from tests.console.test_apps import connect, disconnect_action, mint

MIGRATION = Path(__file__).parents[2] / "storage" / "migrations" / "0014_memory_writer.sql"


async def _remember(mcp: Mcp, text: str, **args: Any) -> dict[str, Any]:
    result = await mcp.call_tool("remember", {"text": text, **args})
    assert not result["isError"], result
    return dict(result["structuredContent"])


def _writer(dsn: str, memory_id: int) -> tuple[str | None, str | None]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT written_by_client, written_by_token FROM memories WHERE id = %s", (memory_id,)
        ).fetchone()
    assert row is not None
    return row[0], row[1]


def _forget_the_audit_log(dsn: str) -> None:
    """What the prune does to records older than the retention."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM audit_events")


def _written_by(html: str) -> str:
    match = re.search(r"<dt>Written by</dt>\s*<dd>(.*?)</dd>", html, re.S)
    assert match, "the page has no Written by"
    return match.group(1)


def _card(html: str, title: str) -> str:
    """The apps page's card of the app titled ``title``."""
    start = html.index(f">{title}</h3>")
    end = html.find("</section>", start)
    return html[start:end]


async def test_an_oauth_apps_memory_names_it_after_the_audit_log_forgot(
    conductor: falcon.testing.ASGIConductor,
    browser: Browser,
    owner_mcp: Mcp,
    console_runtime: Runtime,
    clean_db: str,
) -> None:
    app = await connect(conductor, browser)
    claude = Mcp(conductor, app["access_token"])
    text = "I keep my climbing shoes in the blue bag."
    memory_id = (await _remember(claude, text))["memory_id"]
    assert _writer(clean_db, memory_id) == (app["client_id"], None)

    # Another app saying the same thing merges into it (other arguments than the first
    # call's, or the retry window would answer with the first call's receipt); it
    # reinforces and edits it.
    merged = await _remember(owner_mcp, "  " + text.upper())
    assert merged["memory_id"] == memory_id and merged["message"] == "Already remembered"
    reinforced = await owner_mcp.call_tool("reinforce", {"memory_ids": [memory_id]})
    assert not reinforced["isError"], reinforced
    edited = await owner_mcp.call_tool(
        "update_memory", {"id": memory_id, "text": "I keep my climbing shoes in the red bag."}
    )
    assert not edited["isError"], edited
    assert _writer(clean_db, memory_id) == (app["client_id"], None)

    for forgotten in (False, True):
        if forgotten:
            assert console_runtime.audit is not None
            await console_runtime.audit.flush()
            _forget_the_audit_log(clean_db)
        page = await browser.get(f"/console/memories/{memory_id}")
        assert page.status_code == 200
        written_by = _written_by(page.text)
        assert "Claude" in written_by and app["client_id"] in written_by, written_by

        apps = await browser.get("/console/apps")
        card = _card(apps.text, "Claude")
        assert re.search(r"Memories written</dt>\s*<dd>1</dd>", card), card
        assert re.search(r"Still active</dt>\s*<dd>1</dd>", card), card


async def test_cli_tokens_are_counted_apart_and_forgotten_memories_still_count(
    conductor: falcon.testing.ASGIConductor,
    browser: Browser,
    pool: Any,
    console_settings: Settings,
    clean_db: str,
) -> None:
    laptop = Mcp(conductor, await mint(pool, console_settings, "alice", "laptop"))
    await mint(pool, console_settings, "alice", "cron")
    first = (await _remember(laptop, "My laptop's name is Pebble."))["memory_id"]
    await _remember(laptop, "My backups run at 2 am.")
    client, jti = _writer(clean_db, first)
    assert client == "ownsona-cli" and jti
    gone = await laptop.call_tool("forget", {"id": first})
    assert not gone["isError"], gone
    _forget_the_audit_log(clean_db)

    html = (await browser.get("/console/apps")).text
    laptop_card, cron_card = _card(html, "laptop"), _card(html, "cron")
    assert re.search(r"Memories written</dt>\s*<dd>2</dd>", laptop_card), laptop_card
    assert re.search(r"Still active</dt>\s*<dd>1</dd>", laptop_card), laptop_card
    assert re.search(r"Memories written</dt>\s*<dd>0</dd>", cron_card), cron_card
    page = await browser.get(f"/console/memories/{first}")
    assert "CLI token “laptop”" in _written_by(page.text)


async def test_a_memory_stored_with_supersedes_shows_what_it_replaces(
    browser: Browser, owner_mcp: Mcp, clean_db: str
) -> None:
    a = (await _remember(owner_mcp, "My gym is on Leith Walk."))["memory_id"]
    b = (await _remember(owner_mcp, "I go to the gym on Mondays."))["memory_id"]
    new = await _remember(
        owner_mcp, "I go to the gym on Easter Road on Thursdays.", supersedes=[a, b]
    )
    _forget_the_audit_log(clean_db)
    assert _writer(clean_db, new["memory_id"]) == ("test-assistant", None)

    page = await browser.get(f"/console/memories/{new['memory_id']}")
    replaces = re.search(r"<dt>Replaces</dt><dd>(.*?)</dd>", page.text, re.S)
    assert replaces, page.text
    assert re.sub(r"<[^>]+>", "", replaces.group(1)) == f"#{a}, #{b}"
    old = await browser.get(f"/console/memories/{a}")
    assert f'href="/console/memories/{new["memory_id"]}"' in old.text  # Replaced by


def _field(html: str, name: str) -> str | None:
    found = re.search(rf"<dt>{name}</dt><dd>(.*?)</dd>", html, re.S)
    return re.sub(r"<[^>]+>", "", found.group(1)) if found else None


async def test_a_downweighted_memory_names_the_memory_that_downweighted_it(
    browser: Browser, owner_mcp: Mcp, clean_db: str
) -> None:
    old = (await _remember(owner_mcp, "I mostly cycle to work."))["memory_id"]
    new = await _remember(owner_mcp, "These days I take the tram to work.", downweights=[old])
    assert new["downweighted"] == [old]
    _forget_the_audit_log(clean_db)

    page = (await browser.get(f"/console/memories/{old}")).text
    assert _field(page, "Downweighted by") == f"#{new['memory_id']}"
    assert f'href="/console/memories/{new["memory_id"]}"' in page
    newer = (await browser.get(f"/console/memories/{new['memory_id']}")).text
    assert _field(newer, "Downweights") == f"#{old}"
    assert _field(newer, "Downweighted by") == "—"

    # Erasing the newer memory for good takes its record with it.
    erased = await owner_mcp.call_tool("forget", {"id": new["memory_id"], "hard_delete": True})
    assert not erased["isError"], erased
    assert _field((await browser.get(f"/console/memories/{old}")).text, "Downweighted by") == "—"


async def test_a_memory_written_in_the_console_says_the_console(
    browser: Browser, owner_mcp: Mcp, clean_db: str
) -> None:
    memory_id = (await _remember(owner_mcp, "My favourite tea is lapsang."))["memory_id"]
    key = operation_key((await browser.get(f"/console/memories/{memory_id}")).text)
    forgot = await browser.post(f"/console/memories/{memory_id}/forget", {"operation": key})
    assert forgot.status_code == 303
    key = operation_key((await browser.get(f"/console/memories/{memory_id}")).text)
    again = await browser.post(f"/console/memories/{memory_id}/remember-again", {"operation": key})
    assert again.status_code == 303
    fresh_id = int(again.headers["location"].split("?")[0].rsplit("/", 1)[1])
    assert _writer(clean_db, fresh_id) == ("ownsona-console", None)
    _forget_the_audit_log(clean_db)
    assert _written_by((await browser.get(f"/console/memories/{fresh_id}")).text) == (
        "this console"
    )


async def test_a_memory_from_before_the_writer_was_recorded_says_not_recorded(
    browser: Browser, owner_mcp: Mcp, clean_db: str
) -> None:
    memory_id = (await _remember(owner_mcp, "My first car was a Fiat Panda."))["memory_id"]
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("UPDATE memories SET written_by_client = NULL WHERE id = %s", (memory_id,))
    assert _written_by((await browser.get(f"/console/memories/{memory_id}")).text) == (
        "not recorded"
    )


def _backfill() -> str:
    """The migration's UPDATE of existing rows from the audit log."""
    sql = MIGRATION.read_text("utf-8")
    start = sql.index("UPDATE memories m")
    return sql[start : sql.index(";", start) + 1]


async def test_the_backfill_takes_the_call_that_created_each_row_and_nothing_later(
    owner_mcp: Mcp, owner: int, console_runtime: Runtime, clean_db: str
) -> None:
    created = (await _remember(owner_mcp, "My niece is called Ines."))["memory_id"]
    merged = (await _remember(owner_mcp, "My nephew is called Rui."))["memory_id"]
    stdio = (await _remember(owner_mcp, "My cat sleeps on the radiator."))["memory_id"]
    assert console_runtime.audit is not None
    await console_runtime.audit.flush()
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("UPDATE memories SET written_by_client = NULL, written_by_token = NULL")
        conn.execute("DELETE FROM audit_events")
        events = [
            # The call that stored `created`, by a CLI token: it spans the row's created_at.
            (created, "0 seconds", "mcp", "ownsona-cli", "jti-1", "remember"),
            # A later merge into it by another app: not its writer.
            (created, "1 hour", "mcp", "other-app", None, "remember"),
            # `merged`: its creating record is gone (pruned), only a later one names it.
            (merged, "2 hours", "mcp", "other-app", None, "remember_batch"),
            # Through stdio, which records no client id.
            (stdio, "0 seconds", "stdio", None, None, "remember"),
        ]
        for memory_id, after, entry, client, jti, tool in events:
            conn.execute(
                """
                INSERT INTO audit_events (user_id, at, entry, client_id, token_jti, tool, ok,
                    changed_ids, duration_ms)
                SELECT user_id, created_at + %s::interval + interval '30 ms', %s, %s, %s, %s,
                    true, ARRAY[id], 80
                FROM memories WHERE id = %s
                """,
                (after, entry, client, jti, tool, memory_id),
            )
        conn.execute(_backfill())
    assert _writer(clean_db, created) == ("ownsona-cli", "jti-1")
    assert _writer(clean_db, merged) == (None, None)
    assert _writer(clean_db, stdio) == ("ownsona-stdio", None)


async def test_a_repeated_disconnect_answers_as_the_first_and_revokes_once(
    conductor: falcon.testing.ASGIConductor,
    browser: Browser,
    pool: Any,
    console_settings: Settings,
    console_runtime: Runtime,
    clean_db: str,
) -> None:
    await connect(conductor, browser)
    await mint(pool, console_settings, "alice", "old laptop")
    page = (await browser.get("/console/apps")).text
    key = operation_key(page)
    for kind, notice in (("grants", "app-disconnected"), ("tokens", "token-disconnected")):
        action = disconnect_action(page, kind)
        first = await browser.post(action, {"operation": key})
        assert first.status_code == 303 and f"notice={notice}" in first.headers["location"]
        assert console_runtime.audit is not None
        await console_runtime.audit.flush()
        with psycopg.connect(clean_db) as conn:
            revoked = conn.execute(
                "SELECT (SELECT array_agg(revoked_at) FROM oauth_grants),"
                " (SELECT array_agg(revoked_at) FROM cli_tokens),"
                " (SELECT count(*) FROM oauth_revoked_tokens),"
                " (SELECT count(*) FROM audit_events)"
            ).fetchone()

        again = await browser.post(action, {"operation": key})
        assert again.status_code == 303, again.text
        assert again.headers["location"] == first.headers["location"]
        await console_runtime.audit.flush()
        with psycopg.connect(clean_db) as conn:
            after = conn.execute(
                "SELECT (SELECT array_agg(revoked_at) FROM oauth_grants),"
                " (SELECT array_agg(revoked_at) FROM cli_tokens),"
                " (SELECT count(*) FROM oauth_revoked_tokens),"
                " (SELECT count(*) FROM audit_events)"
            ).fetchone()
        assert after == revoked  # nothing revoked or recorded twice

        # Without the key (an old page) a second disconnect is what it always was.
        stale = await browser.post(action)
        assert stale.status_code == 404
