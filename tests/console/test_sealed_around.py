"""Issue 34 through the console: a chat export waiting for its import, and the recorded
queries the activity page shows, sealed when the owner's memories are; the pages behave
the same sealed and plain (the plain run is each proof's control)."""

from __future__ import annotations

import dataclasses
import json
import secrets
from pathlib import Path
from typing import Any

import pytest

from api.runtime import Runtime
from config.settings import Settings
from tests.api.conftest import Mcp
from tests.api.test_service_roundtrip import InlineWriteQueue
from tests.console.conftest import PUBLIC_URL, Browser
from tests.console.test_chat_import_page import PAGE, confirm, finished
from tests.service.test_sealed_proofs import _dump

EXPORT = Path(__file__).parents[1] / "fixtures" / "chat_exports" / "claude_conversations.json"


@pytest.fixture(params=["plain", "sealed"])
def sealed(request: pytest.FixtureRequest) -> bool:
    return bool(request.param == "sealed")


@pytest.fixture
def console_settings(sealed: bool) -> Settings:
    return Settings(public_url=PUBLIC_URL, seal_memories=sealed, audit_record_queries=True)


@pytest.fixture
async def console_runtime(console_runtime: Runtime, sealed: bool, test_keyring: Any) -> Runtime:
    """The console's runtime, with the tests' keyring when the run seals."""
    if sealed:
        console_runtime.deps = dataclasses.replace(console_runtime.deps, keyring=test_keyring)
        console_runtime.write_queue = InlineWriteQueue(console_runtime.deps)
    return console_runtime


def _export_with(marker: str) -> bytes:
    """The Claude export, its first message of the owner's naming the marker."""
    conversations: list[dict[str, Any]] = json.loads(EXPORT.read_text())
    first = conversations[0]["chat_messages"][0]
    text = f"My running coach is called {marker} and lives in Potsdam."
    first["text"] = text
    for part in first.get("content", []):
        if part.get("type") == "text":
            part["text"] = text
    return json.dumps(conversations).encode()


def _in_dump(dsn: str, marker: str) -> bool:
    return marker.lower().encode() in _dump(dsn).lower()


async def test_an_uploaded_chat_export_waits_sealed_and_imports_the_same(
    browser: Browser, owner_mcp: Mcp, sealed: bool, clean_db: str
) -> None:
    marker = "Uploadmarker" + secrets.token_hex(4)
    name_marker = "Filemarker" + secrets.token_hex(4)
    await browser.get(PAGE)
    result = await browser.post_multipart(
        PAGE, {"step": "upload"}, files={"file": (f"{name_marker}.json", _export_with(marker))}
    )
    assert result.status_code == 200, result.text
    page = result.text
    assert "Claude export" in page
    # Waiting for "Import": in the dump only when plain (the control).
    assert _in_dump(clean_db, marker) is not sealed
    assert _in_dump(clean_db, name_marker) is not sealed

    done = await finished(browser, await confirm(browser, page, "messages"))
    assert "2 memories stored" in done
    found = await owner_mcp.call_tool("recall", {"query": "what is my running coach called"})
    assert marker in found["structuredContent"]["matches"][0]["text"]
    assert _in_dump(clean_db, marker) is not sealed  # imported: sealed memories when sealed


async def test_an_audited_recall_query_is_sealed_and_the_activity_page_shows_it(
    browser: Browser, owner_mcp: Mcp, sealed: bool, clean_db: str
) -> None:
    marker = "Querymarker" + secrets.token_hex(4)
    found = await owner_mcp.call_tool("recall", {"query": f"where does {marker} live"})
    assert not found.get("isError")
    page = await browser.get("/console/activity")  # the page writes the buffered records first
    assert page.status_code == 200
    assert f"where does {marker} live" in page.text
    assert _in_dump(clean_db, marker) is not sealed
