"""The console's chat import: upload, see what the file holds, confirm, find the memories."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from api.runtime import Runtime
from memory.providers.fact_extractor import LLMFactExtractor
from tests.api.conftest import Mcp
from tests.console.conftest import Browser, operation_key
from tests.service.test_chat_import import FACTS, FactServer

FIXTURES = Path(__file__).parents[1] / "fixtures" / "chat_exports"
PAGE = "/console/account/import-chat"
_UPLOAD = re.compile(r'name="upload" value="([^"]+)"')


@pytest.fixture
def llm() -> Iterator[FactServer]:
    server = FactServer(FACTS)
    yield server
    server.close()


@pytest.fixture
async def console_runtime(console_runtime: Runtime, request: pytest.FixtureRequest) -> Runtime:
    """The console's runtime, with a fact extractor on the local LLM when a test asks for one."""
    if "llm" in request.fixturenames:
        server: FactServer = request.getfixturevalue("llm")
        extractor = LLMFactExtractor(base_url=server.url, model="m", client=httpx.AsyncClient)
        console_runtime.deps = dataclasses.replace(console_runtime.deps, fact_extractor=extractor)
    return console_runtime


async def upload(browser: Browser, name: str) -> str:
    await browser.get(PAGE)
    data = (FIXTURES / name).read_bytes()
    result = await browser.post_multipart(
        PAGE, {"step": "upload"}, files={"file": ("conversations.json", data)}
    )
    assert result.status_code == 200, result.text
    return result.text


async def confirm(browser: Browser, page: str, mode: str) -> str:
    match = _UPLOAD.search(page)
    assert match
    fields = {
        "step": "confirm",
        "upload": match.group(1),
        "operation": operation_key(page),
        "mode": mode,
    }
    result = await browser.post(PAGE, fields)
    assert result.status_code == 303, result.text
    location = result.headers["Location"]
    assert location.startswith("/console/jobs/")
    return location


async def finished(browser: Browser, job_page: str) -> str:
    """The job page once the import's background task has ended."""
    assert browser.jobs is not None
    await browser.jobs.wait_all()
    result = await browser.get(job_page)
    assert result.status_code == 200
    return result.text


async def test_a_chatgpt_export_is_read_shown_and_imported_as_facts(
    browser: Browser, owner_mcp: Mcp, llm: FactServer
) -> None:
    page = await upload(browser, "chatgpt_conversations.json")
    assert "ChatGPT export" in page
    assert "<dt>Conversations</dt><dd>2</dd>" in page
    assert "<dt>Messages</dt><dd>10</dd>" in page
    assert "<dt>Your messages</dt><dd>5</dd>" in page
    assert "2024-03-05 12:00 UTC" in page and "2024-06-11 09:30 UTC" in page
    assert 'value="extract" checked' in page
    assert not llm.requests  # nothing is read or stored before the owner confirms

    job_page = await confirm(browser, page, "extract")
    done = await finished(browser, job_page)
    assert "Done." in done and "3 memories stored" in done
    again = await confirm(browser, page, "extract")  # the same form sent twice: the same job
    assert again == job_page

    found = await owner_mcp.call_tool("recall", {"query": "how old is my daughter Mia"})
    best = found["structuredContent"]["matches"][0]
    assert best["text"] == FACTS["Moving to Lisbon"][1]
    assert best["source_provider"] == "chatgpt-import" and best["tags"] == ["imported"]


async def test_without_an_extractor_it_offers_to_store_the_users_messages(
    browser: Browser, owner_mcp: Mcp, clean_db: str
) -> None:
    page = await upload(browser, "claude_conversations.json")
    assert "Claude export" in page and "No fact extractor is set up" in page
    assert 'value="extract"' not in page

    match = _UPLOAD.search(page)
    assert match
    refused = await browser.post(
        PAGE, {"step": "confirm", "upload": match.group(1), "mode": "extract"}
    )
    assert refused.status_code == 400
    assert 'role="alert"' in refused.text and "LLM_BASE_URL and LLM_MODEL" in refused.text
    with psycopg.connect(clean_db) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (0,)

    done = await finished(browser, await confirm(browser, page, "messages"))
    assert "2 memories stored" in done
    listed = await owner_mcp.call_tool("list_memories", {})
    texts = sorted(m["text"] for m in listed["structuredContent"]["memories"])
    assert texts == [
        "I'm training for the Berlin marathon on 29 September; I currently run 40 km a week.",
        "My brother Tom collects vinyl records of 70s jazz.",
    ]


async def test_a_file_that_is_no_export_is_refused_with_the_reason(browser: Browser) -> None:
    await browser.get(PAGE)
    result = await browser.post_multipart(
        PAGE, {"step": "upload"}, files={"file": ("notes.json", b'{"notes": []}')}
    )
    assert result.status_code == 400
    assert 'role="alert"' in result.text and "not a ChatGPT or Claude data export" in result.text


async def test_another_users_upload_cannot_be_confirmed(
    browser: Browser, conductor: object, clean_db: str
) -> None:
    from tests.console.conftest import make_account

    page = await upload(browser, "claude_conversations.json")
    make_account(clean_db, "bob")
    bob = Browser(browser.conductor)
    await bob.sign_in("bob")
    match = _UPLOAD.search(page)
    assert match
    result = await bob.post(PAGE, {"step": "confirm", "upload": match.group(1), "mode": "messages"})
    assert result.status_code == 400 and "Upload the file again" in result.text


async def test_a_post_without_the_csrf_token_is_refused(browser: Browser) -> None:
    await browser.get(PAGE)
    result = await browser.post(PAGE, {"step": "upload"}, csrf=False)
    assert result.status_code == 403


async def test_a_confirm_without_the_csrf_token_stores_nothing(
    browser: Browser, owner_mcp: Mcp
) -> None:
    page = await upload(browser, "claude_conversations.json")
    match = _UPLOAD.search(page)
    assert match
    fields = {"step": "confirm", "upload": match.group(1), "mode": "messages"}
    refused = await browser.post(PAGE, fields, csrf=False)
    assert refused.status_code == 403
    assert browser.jobs is not None
    await browser.jobs.wait_all()
    count = await owner_mcp.call_tool("count_memories", {})
    assert count["structuredContent"]["count"] == 0
