"""A memory's page: every field, who wrote it, and the forms that change it."""

from __future__ import annotations

from typing import Any

import psycopg

from api.runtime import Runtime
from tests.api.conftest import Mcp
from tests.console.conftest import Browser, operation_key
from tests.console.test_memories import bob_mcp  # noqa: F401  (the fixture)

SECRET_TEXT = "My passport is in the drawer under the piano."


async def _remember(mcp: Mcp, text: str, **args: Any) -> int:
    result = await mcp.call_tool("remember", {"text": text, **args})
    assert not result["isError"], result
    return int(result["structuredContent"]["memory_id"])


async def _memory(mcp: Mcp, memory_id: int) -> dict[str, Any]:
    got = await mcp.call_tool("get_memory", {"id": memory_id})
    return dict(got["structuredContent"]["memory"])


async def test_the_page_shows_every_field_and_who_wrote_it(
    browser: Browser, owner_mcp: Mcp
) -> None:
    memory_id = await _remember(
        owner_mcp, SECRET_TEXT, tags=["home"], importance=0.8, capture_mode="explicit"
    )
    page = await browser.get(f"/console/memories/{memory_id}")
    assert page.status_code == 200
    assert SECRET_TEXT in page.text
    assert "test-assistant" in page.text  # the app that stored it
    for label in ("Importance", "Expires", "Last confirmed", "Embedding", "Salience"):
        assert label in page.text
    assert "0.8" in page.text and "explicit" in page.text

    mine = await browser.get("/console/memories")
    new = await browser.post(
        f"/console/memories/{memory_id}/forget",
        {"operation": operation_key(mine.text)},
    )
    assert new.status_code == 303
    again = await browser.post(
        f"/console/memories/{memory_id}/remember-again",
        {"operation": operation_key((await browser.get(new.headers["location"])).text)},
    )
    assert again.status_code == 303
    fresh_id = int(again.headers["location"].split("?")[0].rsplit("/", 1)[1])
    assert fresh_id != memory_id
    fresh = await browser.get(again.headers["location"])
    assert "this console" in fresh.text and "Remembered again" in fresh.text
    assert (await _memory(owner_mcp, fresh_id))["tags"] == ["home"]


async def test_an_edit_of_tags_shows_over_mcp(browser: Browser, owner_mcp: Mcp) -> None:
    memory_id = await _remember(owner_mcp, "I run 10 km every Saturday.", tags=["sport"])
    page = await browser.get(f"/console/memories/{memory_id}")
    result = await browser.post(
        f"/console/memories/{memory_id}/edit",
        {
            "text": "I run 10 km every Saturday.",
            "tags": "sport, Weekend",
            "importance": "0.5",
            "expires_at": "",
            "operation": operation_key(page.text),
        },
    )
    assert result.status_code == 303
    assert "Saved." in (await browser.get(result.headers["location"])).text
    memory = await _memory(owner_mcp, memory_id)
    assert memory["tags"] == ["sport", "weekend"]
    assert memory["text"] == "I run 10 km every Saturday."

    page = await browser.get(f"/console/memories/{memory_id}")
    bad = await browser.post(
        f"/console/memories/{memory_id}/edit",
        {"text": "I run 12 km.", "tags": "sport", "importance": "7", "expires_at": ""},
    )
    assert bad.status_code == 400 and 'role="alert"' in bad.text
    assert (await _memory(owner_mcp, memory_id))["text"] == "I run 10 km every Saturday."


async def test_event_time_is_shown_and_edited_through_update_memory(
    browser: Browser, owner_mcp: Mcp
) -> None:
    memory_id = await _remember(owner_mcp, "We adopted Biscuit on 2023-05-07.")
    page = await browser.get(f"/console/memories/{memory_id}")
    for label in ("Happened", "Holds from", "Holds until", "read from the text"):
        assert label in page.text
    assert 'name="occurred_at" value="2023-05-07T00:00"' in page.text

    def form(**times: str) -> dict[str, str]:
        return {
            "text": "We adopted Biscuit on 2023-05-07.",
            "tags": "",
            "importance": "0.5",
            "expires_at": "",
            "occurred_at": "2023-05-07T00:00",
            "valid_from": "",
            "valid_to": "",
            **times,
        }

    saved = await browser.post(
        f"/console/memories/{memory_id}/edit",
        {
            **form(occurred_at="2023-05-06T18:30", valid_from="2023-05-07T00:00"),
            "operation": operation_key(page.text),
        },
    )
    assert saved.status_code == 303
    memory = await _memory(owner_mcp, memory_id)
    assert memory["occurred_at"] == "2023-05-06T18:30:00Z"
    assert memory["occurred_at_parsed"] is False  # the owner's value now
    assert memory["valid_from"] == "2023-05-07T00:00:00Z" and memory["valid_to"] is None

    # A span that ends before it starts: refused by the tool, shown, nothing changed.
    page = await browser.get(f"/console/memories/{memory_id}")
    bad = await browser.post(
        f"/console/memories/{memory_id}/edit",
        {
            **form(
                occurred_at="2023-05-06T18:30",
                valid_from="2023-05-07T00:00",
                valid_to="2023-05-01T00:00",
            ),
            "operation": operation_key(page.text),
        },
    )
    assert bad.status_code == 400 and 'role="alert"' in bad.text and "valid_to" in bad.text
    assert await _memory(owner_mcp, memory_id) == memory

    # Emptied fields are cleared.
    page = await browser.get(f"/console/memories/{memory_id}")
    cleared = await browser.post(
        f"/console/memories/{memory_id}/edit",
        {**form(occurred_at="", valid_from=""), "operation": operation_key(page.text)},
    )
    assert cleared.status_code == 303
    memory = await _memory(owner_mcp, memory_id)
    assert memory["occurred_at"] is None and memory["valid_from"] is None


async def test_a_kept_memory_is_unlocked_by_unticking_keep_alone(
    browser: Browser, owner_mcp: Mcp
) -> None:
    memory_id = await _remember(owner_mcp, "My blood type is O negative.", keep=True)
    page = await browser.get(f"/console/memories/{memory_id}")
    assert "kept (locked)" in page.text
    unlocked = await browser.post(
        f"/console/memories/{memory_id}/edit",
        {"text": "My blood type is O negative.", "tags": "", "importance": "0.5"},
    )
    assert unlocked.status_code == 303
    assert (await _memory(owner_mcp, memory_id))["keep"] is False


async def test_confirm_submitted_twice_with_one_key_counts_once(
    browser: Browser, owner_mcp: Mcp
) -> None:
    memory_id = await _remember(owner_mcp, "My dentist is Dr. Okafor.")
    page = await browser.get(f"/console/memories/{memory_id}")
    form = {"operation": operation_key(page.text)}
    for _ in range(2):
        result = await browser.post(f"/console/memories/{memory_id}/confirm", form)
        assert result.status_code == 303
    once = (await _memory(owner_mcp, memory_id))["salience"]
    page = await browser.get(f"/console/memories/{memory_id}")
    await browser.post(
        f"/console/memories/{memory_id}/confirm", {"operation": operation_key(page.text)}
    )
    assert 0 < once < (await _memory(owner_mcp, memory_id))["salience"]


async def test_forget_soft_then_hard_from_the_page(browser: Browser, owner_mcp: Mcp) -> None:
    memory_id = await _remember(owner_mcp, "My cat Miso is afraid of thunder.")
    page = await browser.get(f"/console/memories/{memory_id}")
    soft = await browser.post(
        f"/console/memories/{memory_id}/forget",
        {"reason": "Miso moved out", "operation": operation_key(page.text)},
    )
    assert soft.status_code == 303
    found = await owner_mcp.call_tool("recall", {"query": "is my cat afraid of storms"})
    assert memory_id not in [m["id"] for m in found["structuredContent"]["matches"]]
    tomb = await browser.get(soft.headers["location"])
    assert "Miso moved out" in tomb.text and "Remember again" in tomb.text

    unsure = await browser.post(f"/console/memories/{memory_id}/forget", {"hard": "1"})
    assert unsure.status_code == 400 and "cannot be undone" in unsure.text
    assert (await _memory(owner_mcp, memory_id))["id"] == memory_id
    erased = await browser.post(
        f"/console/memories/{memory_id}/forget", {"hard": "1", "understood": "1"}
    )
    assert erased.status_code == 303
    assert (await owner_mcp.call_tool("get_memory", {"id": memory_id}))["isError"]
    assert (await browser.get(f"/console/memories/{memory_id}")).status_code == 404


async def test_another_users_memory_is_404_everywhere_and_unchanged(
    browser: Browser,
    bob_mcp: Mcp,  # noqa: F811
) -> None:
    theirs = await _remember(bob_mcp, "Bob keeps a spare key under the mat.", tags=["home"])
    unknown = theirs + 1000
    for memory_id in (theirs, unknown):
        assert (await browser.get(f"/console/memories/{memory_id}")).status_code == 404
        for action, form in (
            ("edit", {"text": "changed", "tags": "x1", "importance": "0.1"}),
            ("confirm", {}),
            ("forget", {"reason": "nope"}),
            ("forget", {"hard": "1", "understood": "1"}),
            ("remember-again", {}),
        ):
            result = await browser.post(f"/console/memories/{memory_id}/{action}", form)
            assert result.status_code == 404, (memory_id, action)
    memory = await _memory(bob_mcp, theirs)
    assert memory["text"] == "Bob keeps a spare key under the mat."
    assert memory["tags"] == ["home"] and memory["deleted_at"] is None
    assert memory["use_count"] == 0


async def test_every_post_without_the_csrf_token_is_refused_and_changes_nothing(
    browser: Browser, owner_mcp: Mcp
) -> None:
    memory_id = await _remember(owner_mcp, "I take the 7:40 train.", tags=["commute"])
    for action, form in (
        ("edit", {"text": "I take the bus.", "tags": "", "importance": "0.5"}),
        ("confirm", {}),
        ("forget", {"reason": "x"}),
        ("forget", {"hard": "1", "understood": "1"}),
        ("remember-again", {}),
    ):
        result = await browser.post(f"/console/memories/{memory_id}/{action}", form, csrf=False)
        assert result.status_code == 403, action
    memory = await _memory(owner_mcp, memory_id)
    assert memory["text"] == "I take the 7:40 train." and memory["deleted_at"] is None
    assert memory["use_count"] == 0


async def test_memory_text_never_reaches_the_audit_log(
    browser: Browser, owner_mcp: Mcp, console_runtime: Runtime, clean_db: str
) -> None:
    memory_id = await _remember(owner_mcp, SECRET_TEXT, tags=["home"])
    page = await browser.get(f"/console/memories/{memory_id}")
    edited = await browser.post(
        f"/console/memories/{memory_id}/edit",
        {
            "text": SECRET_TEXT + " Or the piano bench.",
            "tags": "home",
            "importance": "0.5",
            "operation": operation_key(page.text),
        },
    )
    assert edited.status_code == 303, edited.text
    stored = await owner_mcp.call_tool("get_memory", {"id": memory_id})
    assert stored["structuredContent"]["memory"]["text"].endswith("Or the piano bench.")
    await browser.get("/console/memories?q=where+is+my+passport")
    await browser.get("/console/memories")
    assert console_runtime.audit is not None
    await console_runtime.audit.flush()
    with psycopg.connect(clean_db) as conn:
        rows = conn.execute("SELECT row_to_json(a)::text, entry FROM audit_events a").fetchall()
    assert {entry for _, entry in rows} >= {"console", "mcp"}
    for text, _entry in rows:
        assert "passport" not in text and "piano" not in text
