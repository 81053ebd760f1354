"""The clean-up page: groups side by side, resolved in one click, only the owner's."""

from __future__ import annotations

import re
from typing import Any

import falcon.testing
from markupsafe import escape

from api.runtime import Runtime
from auth.tokens import issue_access_token
from config.settings import Settings
from tests.api.conftest import Mcp
from tests.console.conftest import Browser, make_account

SISTER = "My sister Anna lives in Berlin and works as a nurse."
SISTER_AGAIN = "My sister Anna lives in Berlin and she works as a nurse."
RED_CAR = "The user's car is a red 2019 Honda Civic."
BLUE_CAR = "The user's car is a blue 2021 Tesla Model 3."
#: As the page shows them (escaped).
RED_SHOWN, BLUE_SHOWN = str(escape(RED_CAR)), str(escape(BLUE_CAR))
DUPLICATES = "/console/cleanup?kind=duplicates&threshold=0.85"


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
    """The fields of the first form on the page for ``action`` (on ``memory_id``);
    with ``token`` its CSRF field too (as a browser sends it), else the test adds it."""
    for form in re.findall(r"<form[^>]*method=\"post\"[^>]*>(.*?)</form>", html, re.S):
        fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form)
        values = dict(fields)
        if values.get("action") != action:
            continue
        if memory_id is not None and values.get("id") != str(memory_id):
            continue
        return [(k, v) for k, v in fields if token or k != "csrf_token"]
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
