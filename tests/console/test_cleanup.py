"""The clean-up page: groups side by side, resolved in one click, only the owner's."""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any

import falcon.testing
import psycopg
import pytest
from markupsafe import escape

from api.runtime import Runtime
from auth.tokens import issue_access_token
from config.settings import Settings
from memory.calls import CallMeta
from memory.commands import Forget
from memory.commands.codec import Command
from memory.commands.editing import UpdateMemory
from tests.api.conftest import Mcp
from tests.api.test_service_roundtrip import InlineWriteQueue
from tests.console.conftest import Browser, make_account
from tests.tool_calls import meta_for

SISTER = "My sister Anna lives in Berlin and works as a nurse."
SISTER_AGAIN = "My sister Anna lives in Berlin and she works as a nurse."
SISTER_THIRD = "My sister Anna lives in Berlin, where she works as a nurse."
RED_CAR = "The user's car is a red 2019 Honda Civic."
BLUE_CAR = "The user's car is a blue 2021 Tesla Model 3."
#: As the page shows them (escaped).
RED_SHOWN, BLUE_SHOWN = str(escape(RED_CAR)), str(escape(BLUE_CAR))
DUPLICATES = "/console/cleanup?kind=duplicates&threshold=0.85"


class LocksTheRestAfterOneForget(InlineWriteQueue):
    """The worker, with another assistant's write landing between two of the console's:
    right after the first real ``forget`` of a memory in ``group``, the group's remaining
    members are locked (``update_memory keep: true``), as a concurrent call would."""

    def __init__(self, deps: Any) -> None:
        super().__init__(deps)
        self.group: set[int] = set()
        self.settings = deps.settings

    async def submit(self, meta: CallMeta, command: Command) -> dict[str, Any]:
        payload = await super().submit(meta, command)
        args = command.to_json()
        if isinstance(command, Forget) and not args["dry_run"] and args["id"] in self.group:
            rest, self.group = self.group - {args["id"]}, set()
            for mid in rest:
                lock = UpdateMemory.parse({"id": mid, "keep": True}, self.settings)
                locked = await super().submit(meta_for(meta.user_id, uuid.uuid4().hex), lock)
                assert locked["ok"], locked
        return payload


@pytest.fixture
async def console_runtime(console_runtime: Runtime, request: pytest.FixtureRequest) -> Runtime:
    """The console's runtime; a test asking for ``interloper`` gets its write queue."""
    if "interloper" in request.fixturenames:
        console_runtime.write_queue = LocksTheRestAfterOneForget(console_runtime.deps)
    return console_runtime


@pytest.fixture
def interloper(console_runtime: Runtime) -> LocksTheRestAfterOneForget:
    assert isinstance(console_runtime.write_queue, LocksTheRestAfterOneForget)
    return console_runtime.write_queue


def scans(dsn: str) -> list[tuple[str, str]]:
    """The clean-up scan jobs, oldest first: (state, subject)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT state, subject FROM console_jobs WHERE kind = 'Clean-up scan'"
            " ORDER BY created_at"
        ).fetchall()
    return [(str(a), str(b)) for a, b in rows]


async def scanned(browser: Browser, path: str) -> falcon.testing.Result:
    """The page once its scan has run: the first view starts it, the test lets it finish."""
    first = await browser.get(path)
    assert first.status_code == 200, first.text
    assert browser.jobs is not None
    await browser.jobs.wait_all()
    page = await browser.get(path)
    assert page.status_code == 200 and "Scanned just now" in page.text, page.text
    return page


async def remember(mcp: Mcp, text: str, **extra: Any) -> int:
    result = await mcp.call_tool("remember", {"text": text, **extra})
    assert not result["isError"], result
    return int(result["structuredContent"]["memory_id"])


async def memory(mcp: Mcp, memory_id: int) -> dict[str, Any]:
    result = await mcp.call_tool("get_memory", {"id": memory_id})
    assert not result["isError"], result
    return dict(result["structuredContent"]["memory"])


def assistant_of(
    conductor: falcon.testing.ASGIConductor, runtime: Runtime, settings: Settings, user_id: int
) -> Mcp:
    token = issue_access_token(
        runtime.keystore,
        settings,
        user_id=user_id,
        client_id="bobs-assistant",
        scope="memory:read memory:write",
    )
    return Mcp(conductor, token)


def group_form(
    html: str, action: str, memory_id: int | None = None, *, token: bool = False
) -> list[tuple[str, str]]:
    """The fields the page's form for ``action`` (on ``memory_id``) sends: its hidden
    fields and, in a group's form, the pressed button's; with ``token`` its CSRF field too
    (as a browser sends it), else the test adds it."""
    for form in re.findall(r"<form[^>]*method=\"post\"[^>]*>(.*?)</form>", html, re.S):
        fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form)
        fields = [(k, v) for k, v in fields if token or k != "csrf_token"]
        buttons = re.findall(r'<button type="submit" name="choose" value="([a-z]+):(\d+)"', form)
        for chosen_action, chosen in buttons:
            if chosen_action == action and memory_id in (None, int(chosen)):
                return [*fields, ("choose", f"{action}:{chosen}")]
        if dict(fields).get("action") == action and memory_id is None:
            return fields
    raise AssertionError(f"no {action} form for {memory_id}")


async def test_a_duplicate_pair_shows_side_by_side(browser: Browser, owner_mcp: Mcp) -> None:
    first = await remember(owner_mcp, SISTER, tags=["family"])
    second = await remember(owner_mcp, SISTER_AGAIN, tags=["family"])
    page = await scanned(browser, DUPLICATES)
    assert page.status_code == 200
    assert SISTER in page.text and SISTER_AGAIN in page.text
    assert f'href="/console/memories/{first}"' in page.text
    assert f'href="/console/memories/{second}"' in page.text
    assert "Near-duplicates: 1 group" in page.text
    assert 'value="0.85"' in page.text  # the slider keeps the threshold asked for
    # A strict threshold finds nothing: the slider matters.
    strict = await scanned(browser, "/console/cleanup?kind=duplicates&threshold=1.0")
    assert SISTER_AGAIN not in strict.text and "Nothing to clean up" in strict.text


async def test_keep_this_one_forgets_the_others_for_it(browser: Browser, owner_mcp: Mcp) -> None:
    kept = await remember(owner_mcp, SISTER)
    other = await remember(owner_mcp, SISTER_AGAIN)
    page = await scanned(browser, DUPLICATES)
    # The page's own form, token and all, as the browser submits it.
    form = group_form(page.text, "keep", kept, token=True)
    result = await browser.post("/console/cleanup", form, csrf=False)
    assert result.status_code == 303
    assert "notice=cleanup-kept" in result.headers["location"]

    gone = await memory(owner_mcp, other)
    assert gone["deleted_at"] is not None
    assert gone["replaced_by_id"] == kept
    assert f"#{kept}" in gone["forget_reason"]
    assert (await memory(owner_mcp, kept))["deleted_at"] is None
    after = await browser.get(result.headers["location"])
    assert "Kept the memory you chose" in after.text
    assert SISTER_AGAIN not in after.text and "Near-duplicates: 0 groups" in after.text


async def test_a_double_submitted_keep_is_done_once(browser: Browser, owner_mcp: Mcp) -> None:
    kept = await remember(owner_mcp, SISTER)
    await remember(owner_mcp, SISTER_AGAIN)
    page = await scanned(browser, DUPLICATES)
    form = group_form(page.text, "keep", kept)
    assert (await browser.post("/console/cleanup", form)).status_code == 303
    assert (await browser.post("/console/cleanup", form)).status_code == 303
    stats = await owner_mcp.call_tool("memory_stats", {})
    assert stats["structuredContent"]["soft_deleted"] == 1


async def test_a_corrected_fact_supersedes_the_group(browser: Browser, owner_mcp: Mcp) -> None:
    first = await remember(owner_mcp, SISTER, tags=["family"])
    second = await remember(owner_mcp, SISTER_AGAIN, tags=["family"])
    page = await scanned(browser, DUPLICATES)
    form = group_form(page.text, "correct")
    corrected = "My sister Anna lives in Hamburg and works as a doctor."
    result = await browser.post("/console/cleanup", [*form, ("text", corrected)])
    assert result.status_code == 303 and "notice=cleanup-corrected" in result.headers["location"]

    found = await owner_mcp.call_tool("text_search", {"text": "Hamburg"})
    [new] = found["structuredContent"]["memories"]
    assert new["text"] == corrected and new["tags"] == ["family"]
    for old in (first, second):
        row = await memory(owner_mcp, old)
        assert row["deleted_at"] is not None and row["replaced_by_id"] == new["id"]
    after = await browser.get(result.headers["location"])
    assert SISTER not in after.text and SISTER_AGAIN not in after.text


async def test_an_empty_correction_changes_nothing(browser: Browser, owner_mcp: Mcp) -> None:
    first = await remember(owner_mcp, SISTER)
    await remember(owner_mcp, SISTER_AGAIN)
    page = await scanned(browser, DUPLICATES)
    result = await browser.post("/console/cleanup", [*group_form(page.text, "correct")])
    assert result.status_code == 400
    assert 'role="alert"' in result.text and "Write the corrected fact" in result.text
    assert (await memory(owner_mcp, first))["deleted_at"] is None


async def test_this_one_is_right_confirms_it_and_settles_the_group(
    browser: Browser, owner_mcp: Mcp, clean_db: str
) -> None:
    first = await remember(owner_mcp, SISTER, last_confirmed_at="2024-01-01T00:00:00Z")
    second = await remember(owner_mcp, SISTER_AGAIN, last_confirmed_at="2024-01-01T00:00:00Z")
    page = await scanned(browser, DUPLICATES)
    result = await browser.post("/console/cleanup", group_form(page.text, "confirm", second))
    assert result.status_code == 303 and "notice=cleanup-confirmed" in result.headers["location"]

    confirmed = await memory(owner_mcp, second)
    assert confirmed["last_confirmed_at"] > "2025"
    assert (await memory(owner_mcp, first))["last_confirmed_at"].startswith("2024-01-01")
    after = await browser.get(result.headers["location"])
    assert SISTER_AGAIN not in after.text and "1 group is hidden" in after.text
    shown = await browser.get(DUPLICATES + "&show=all")
    assert SISTER_AGAIN in shown.text


async def test_a_conflict_appears_under_conflicts(browser: Browser, owner_mcp: Mcp) -> None:
    red = await remember(owner_mcp, RED_CAR, tags=["car"])
    blue = await remember(owner_mcp, BLUE_CAR, tags=["car"])
    page = await scanned(browser, "/console/cleanup?kind=conflicts")
    assert page.status_code == 200
    assert RED_SHOWN in page.text and BLUE_SHOWN in page.text
    assert "Different values for one fact" in page.text
    assert 'value="0.80"' in page.text  # the tool's default for conflicts
    duplicates = await scanned(browser, "/console/cleanup")
    assert RED_SHOWN not in duplicates.text

    result = await browser.post("/console/cleanup", group_form(page.text, "keep", blue))
    assert result.status_code == 303
    assert (await memory(owner_mcp, red))["replaced_by_id"] == blue
    after = await browser.get(result.headers["location"])
    assert RED_SHOWN not in after.text


async def test_a_locked_memory_is_refused_in_an_alert_and_nothing_changes(
    browser: Browser, owner_mcp: Mcp
) -> None:
    locked = await remember(owner_mcp, SISTER, keep=True)
    other = await remember(owner_mcp, SISTER_AGAIN)
    page = await scanned(browser, DUPLICATES)
    result = await browser.post("/console/cleanup", group_form(page.text, "keep", other))
    assert result.status_code == 400
    assert 'role="alert"' in result.text and "Nothing was changed" in result.text
    assert (await memory(owner_mcp, locked))["deleted_at"] is None
    assert (await memory(owner_mcp, other))["deleted_at"] is None


async def test_another_users_memories_are_not_found_and_untouched(
    browser: Browser,
    owner_mcp: Mcp,
    conductor: falcon.testing.ASGIConductor,
    console_runtime: Runtime,
    console_settings: Settings,
    clean_db: str,
) -> None:
    bob = assistant_of(conductor, console_runtime, console_settings, make_account(clean_db, "bob"))
    theirs = await remember(bob, SISTER_AGAIN, last_confirmed_at="2024-01-01T00:00:00Z")
    mine = await remember(owner_mcp, SISTER)
    page = await scanned(browser, DUPLICATES)
    assert SISTER_AGAIN not in page.text  # never grouped with someone else's
    key = "console-test-operation"
    base = [("kind", "duplicates"), ("threshold", "0.85"), ("ids", str(mine))]
    base += [("ids", str(theirs)), ("operation", key)]
    for action, chosen in (("keep", mine), ("confirm", theirs), ("correct", mine)):
        fields = [*base, ("action", action), ("id", str(chosen)), ("text", "Anna moved.")]
        result = await browser.post("/console/cleanup", fields)
        assert result.status_code == 404, action
    row = await memory(bob, theirs)
    assert row["deleted_at"] is None and row["last_confirmed_at"].startswith("2024-01-01")
    assert (await memory(owner_mcp, mine))["deleted_at"] is None
    stats = await owner_mcp.call_tool("memory_stats", {})
    assert stats["structuredContent"]["total"] == 1  # no corrected fact was stored


async def test_a_post_without_the_csrf_token_changes_nothing(
    browser: Browser, owner_mcp: Mcp
) -> None:
    kept = await remember(owner_mcp, SISTER)
    other = await remember(owner_mcp, SISTER_AGAIN)
    page = await scanned(browser, DUPLICATES)
    result = await browser.post("/console/cleanup", group_form(page.text, "keep", kept), csrf=False)
    assert result.status_code == 403
    assert (await memory(owner_mcp, other))["deleted_at"] is None


# --- the scan-then-show flow -------------------------------------------------------


async def test_the_first_view_starts_exactly_one_scan_and_shows_it_once_done(
    browser: Browser, owner_mcp: Mcp, clean_db: str
) -> None:
    await remember(owner_mcp, SISTER)
    await remember(owner_mcp, SISTER_AGAIN)
    views = await asyncio.gather(*(browser.get(DUPLICATES) for _ in range(3)))
    for view in views:  # concurrent first views: one scan, each view links to it
        assert view.status_code == 200
        assert "Scanning…" in view.text and SISTER not in view.text
        assert "Nothing to clean up" not in view.text
    assert scans(clean_db) == [("running", "cleanup:duplicates:0.85")]
    job = re.search(r'data-job-poll="(/console/jobs/[^"]+)"', views[0].text)
    assert job and all(job.group(1) in view.text for view in views)
    assert 'http-equiv="refresh"' not in views[0].text  # a link and a script, no meta refresh
    assert 'href="/console/cleanup?kind=duplicates&amp;threshold=0.85"' in views[0].text

    assert browser.jobs is not None
    await browser.jobs.wait_all()
    progress = await browser.get(job.group(1))
    assert "Clean-up scan" in progress.text and "1 group found." in progress.text
    assert 'href="/console/cleanup?kind=duplicates&amp;threshold=0.85">Back to clean-up' in (
        progress.text
    )
    page = await browser.get(DUPLICATES)
    assert "Scanned just now" in page.text and "Near-duplicates: 1 group" in page.text
    assert SISTER in page.text and SISTER_AGAIN in page.text
    assert "Scanning" not in page.text
    await browser.get(DUPLICATES)
    assert scans(clean_db) == [("done", "cleanup:duplicates:0.85")]  # nothing changed: no rescan
    # Another threshold is another scan.
    assert "Scanning…" in (await browser.get("/console/cleanup?threshold=0.9")).text
    assert len(scans(clean_db)) == 2


async def test_a_member_forgotten_elsewhere_leaves_the_shown_group(
    browser: Browser, owner_mcp: Mcp, clean_db: str
) -> None:
    ids = [await remember(owner_mcp, t) for t in (SISTER, SISTER_AGAIN, SISTER_THIRD)]
    page = await scanned(browser, DUPLICATES)
    assert all(f'href="/console/memories/{i}"' in page.text for i in ids)
    forgot = await owner_mcp.call_tool("forget", {"id": ids[1]})  # an assistant, over MCP
    assert not forgot["isError"], forgot

    after = await browser.get(DUPLICATES)
    assert f'href="/console/memories/{ids[1]}"' not in after.text and SISTER_AGAIN not in after.text
    assert f'href="/console/memories/{ids[0]}"' in after.text
    assert f'href="/console/memories/{ids[2]}"' in after.text
    assert "Group 1: 2 memories" in after.text
    # Still the old scan's result, its members read again; a fresh scan runs meanwhile.
    assert "Scanning again in the background" in after.text
    assert [state for state, _ in scans(clean_db)] == ["done", "running"]
    form = group_form(after.text, "keep", ids[0])
    assert [v for k, v in form if k == "ids"] == [str(ids[0]), str(ids[2])]

    # Edited since the scan read it: offered no more until a scan has seen the new text.
    edited = await owner_mcp.call_tool(
        "update_memory", {"id": ids[2], "text": "My sister Anna moved to Munich."}
    )
    assert not edited["isError"], edited
    gone = await browser.get(DUPLICATES)
    assert "Near-duplicates: 0 groups" in gone.text and "Munich" not in gone.text


async def test_scan_again_runs_a_new_scan(browser: Browser, owner_mcp: Mcp, clean_db: str) -> None:
    await remember(owner_mcp, SISTER)
    await remember(owner_mcp, SISTER_AGAIN)
    page = await scanned(browser, DUPLICATES)
    form = group_form(page.text, "scan", token=True)
    result = await browser.post("/console/cleanup", form, csrf=False)
    assert result.status_code == 303 and "notice=cleanup-scanning" in result.headers["location"]
    again = await browser.post("/console/cleanup", form, csrf=False)  # a double click
    assert again.status_code == 303
    assert [state for state, _ in scans(clean_db)] == ["done", "running"]
    during = await browser.get(result.headers["location"])
    assert "Scanning again" in during.text and SISTER in during.text  # the old result meanwhile
    assert browser.jobs is not None
    await browser.jobs.wait_all()
    assert [state for state, _ in scans(clean_db)] == ["done", "done"]
    assert "Scanned just now" in (await browser.get(DUPLICATES)).text


async def test_a_scan_post_without_the_csrf_token_starts_nothing(
    browser: Browser, owner_mcp: Mcp, clean_db: str
) -> None:
    await remember(owner_mcp, SISTER)
    page = await scanned(browser, DUPLICATES)
    result = await browser.post("/console/cleanup", group_form(page.text, "scan"), csrf=False)
    assert result.status_code == 403
    assert len(scans(clean_db)) == 1


async def test_an_old_scan_is_shown_while_a_fresh_one_runs(
    browser: Browser, owner_mcp: Mcp, clean_db: str
) -> None:
    await remember(owner_mcp, SISTER)
    await remember(owner_mcp, SISTER_AGAIN)
    await scanned(browser, DUPLICATES)
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("UPDATE console_jobs SET created_at = now() - interval '2 hours'")
    page = await browser.get(DUPLICATES)
    assert "Scanned 2 hours ago" in page.text and "Scanning again in the background" in page.text
    assert SISTER in page.text and SISTER_AGAIN in page.text
    assert [state for state, _ in scans(clean_db)] == ["done", "running"]
    assert browser.jobs is not None
    await browser.jobs.wait_all()
    assert "Scanned just now" in (await browser.get(DUPLICATES)).text


async def test_a_failed_rescan_is_not_retried_by_every_view(
    browser: Browser, owner_mcp: Mcp, owner: int, clean_db: str
) -> None:
    await remember(owner_mcp, SISTER)
    await remember(owner_mcp, SISTER_AGAIN)
    await scanned(browser, DUPLICATES)
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("UPDATE console_jobs SET created_at = now() - interval '2 hours'")
        conn.execute(
            "INSERT INTO console_jobs (id, user_id, kind, subject, state, finished_at)"
            " VALUES ('failed-rescan', %s, 'Clean-up scan', 'cleanup:duplicates:0.85',"
            " 'failed', now())",
            (owner,),
        )
    for _ in range(2):
        page = await browser.get(DUPLICATES)
        assert SISTER in page.text and "data-job-poll" not in page.text
    assert sorted(state for state, _ in scans(clean_db)) == ["done", "failed"]


async def test_a_change_to_the_store_rescans_in_the_background(
    browser: Browser, owner_mcp: Mcp, clean_db: str
) -> None:
    await remember(owner_mcp, SISTER)
    await remember(owner_mcp, SISTER_AGAIN)
    await scanned(browser, DUPLICATES)
    third = await remember(owner_mcp, SISTER_THIRD)
    page = await browser.get(DUPLICATES)
    assert "Scanning again in the background" in page.text
    assert "Group 1: 2 memories" in page.text and SISTER_THIRD not in page.text
    assert browser.jobs is not None
    await browser.jobs.wait_all()
    fresh = await browser.get(DUPLICATES)
    assert "Group 1: 3 memories" in fresh.text and f'href="/console/memories/{third}"' in fresh.text
    assert [state for state, _ in scans(clean_db)] == ["done", "done"]


async def test_an_interrupted_first_scan_is_offered_again(
    browser: Browser, owner_mcp: Mcp, owner: int, clean_db: str
) -> None:
    await remember(owner_mcp, SISTER)
    await remember(owner_mcp, SISTER_AGAIN)
    with psycopg.connect(clean_db, autocommit=True) as conn:
        # A scan whose process was killed: running, silent for ten minutes, its key still held.
        conn.execute(
            "INSERT INTO console_jobs (id, user_id, kind, subject, operation_key, updated_at)"
            " VALUES ('dead-scan', %s, 'Clean-up scan', 'cleanup:duplicates:0.85',"
            " 'scan:duplicates:0.85', now() - interval '10 minutes')",
            (owner,),
        )
    page = await browser.get(DUPLICATES)
    assert "Interrupted: the server restarted. Start it again." in page.text
    assert scans(clean_db) == [("running", "cleanup:duplicates:0.85")]  # no retry on a view
    result = await browser.post("/console/cleanup", group_form(page.text, "scan"))
    assert result.status_code == 303
    assert [state for state, _ in scans(clean_db)] == ["failed", "running"]
    assert browser.jobs is not None
    await browser.jobs.wait_all()
    assert SISTER_AGAIN in (await browser.get(DUPLICATES)).text


async def test_keep_this_one_says_what_it_forgot_when_a_later_forget_is_refused(
    browser: Browser, owner_mcp: Mcp, interloper: LocksTheRestAfterOneForget
) -> None:
    kept, *others = [await remember(owner_mcp, t) for t in (SISTER, SISTER_AGAIN, SISTER_THIRD)]
    page = await scanned(browser, DUPLICATES)
    assert "Group 1: 3 memories" in page.text
    interloper.group = set(others)
    result = await browser.post("/console/cleanup", group_form(page.text, "keep", kept))
    assert result.status_code == 400
    rows = {mid: await memory(owner_mcp, mid) for mid in others}
    [forgotten] = [mid for mid, row in rows.items() if row["deleted_at"] is not None]
    [locked] = [mid for mid, row in rows.items() if row["deleted_at"] is None]
    assert rows[forgotten]["replaced_by_id"] == kept and rows[locked]["keep"] is True
    assert 'role="alert"' in result.text
    assert f"Forgot #{forgotten}, then stopped:" in result.text
    assert "Nothing was changed" not in result.text
    # Under the alert, the group as it is now: one member forgotten, one changed (locked)
    # since the scan, so nothing is offered until the fresh scan the change started.
    assert "Near-duplicates: 0 groups" in result.text
    assert "Scanning again in the background" in result.text


async def test_a_large_group_shows_and_acts_on_its_first_members_only(
    browser: Browser, owner_mcp: Mcp, clean_db: str
) -> None:
    texts = [f"My sister Anna lives in Berlin and works as a nurse (note {i})." for i in range(13)]
    ids = [await remember(owner_mcp, t) for t in texts]
    page = await scanned(browser, DUPLICATES)
    assert "Group 1: 10 memories" in page.text
    assert "This group has 13 memories; the first 10 are shown" in page.text
    shown = [i for i in ids if f'href="/console/memories/{i}"' in page.text]
    assert len(shown) == 10
    form = group_form(page.text, "keep", shown[0])
    assert sorted(int(v) for k, v in form if k == "ids") == sorted(shown)
    assert page.text.count('name="choose" value="keep:') == 10
    # The stored scan keeps ids, not the members' text: a forget leaves no copy behind.
    with psycopg.connect(clean_db) as conn:
        [(result,)] = conn.execute("SELECT result::text FROM console_jobs").fetchall()
    assert "Berlin" not in result and str(ids[0]) in result

    assert (await browser.post("/console/cleanup", form)).status_code == 303
    kept_out = set(ids) - set(shown)
    for mid in kept_out:  # never shown, so never forgotten
        assert (await memory(owner_mcp, mid))["deleted_at"] is None
    # What is left of the group: the kept one and the three that were not shown.
    after = await browser.get(DUPLICATES)
    assert "Group 1: 4 memories" in after.text and "This group has" not in after.text
