"""The stats page: the store's figures, as charts and as tables."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import falcon.testing
import psycopg

from api.runtime import Runtime
from config.settings import Settings
from tests.api.conftest import Mcp
from tests.console.conftest import Browser, make_account
from tests.console.test_cleanup import assistant_of

SVG = "{http://www.w3.org/2000/svg}"


def figure(html: str, name: str) -> str:
    match = re.search(rf'data-figure="{name}">([^<]*)<', html)
    assert match, name
    return match.group(1)


def table_rows(html: str, table_id: str) -> dict[str, str]:
    match = re.search(rf'<table id="{table_id}">(.*?)</table>', html, re.S)
    assert match, table_id
    rows = re.findall(r'<th scope="row">([^<]*)</th><td class="num">(\d+)</td>', match.group(1))
    return dict(rows)


def svgs(html: str) -> list[ET.Element]:
    found = [ET.fromstring(m) for m in re.findall(r"<svg .*?</svg>", html, re.S)]
    for root in found:
        assert root.get("role") == "img" and root.find(SVG + "title") is not None
    return found


async def test_stats_show_the_counts_and_todays_recall_calls(
    browser: Browser, owner_mcp: Mcp
) -> None:
    ids = []
    for text, tags in (
        ("My sister Anna lives in Berlin.", ["family"]),
        ("My brother Tom plays the cello.", ["family", "music"]),
        ("I am allergic to peanuts.", ["health"]),
        ("I drink my coffee black.", ["preferences"]),
    ):
        stored = await owner_mcp.call_tool("remember", {"text": text, "tags": tags})
        ids.append(stored["structuredContent"]["memory_id"])
    await owner_mcp.call_tool("forget", {"id": ids[3], "reason": "changed my mind"})
    for query in ("where does my sister live", "allergies"):
        await owner_mcp.call_tool("recall", {"query": query})
    await owner_mcp.call_tool("search_memory", {"query": "cello"})
    await owner_mcp.call_tool("list_memories", {})  # not a recall call

    page = await browser.get("/console/stats")
    assert page.status_code == 200
    assert figure(page.text, "active") == "3"
    assert figure(page.text, "soft_deleted") == "1"
    assert figure(page.text, "total") == "4"
    assert figure(page.text, "recall_today") == "3"
    assert table_rows(page.text, "table-state") == {"Active": "3", "Forgotten": "1", "Expired": "0"}
    assert table_rows(page.text, "table-tags") == {"family": "2", "health": "1", "music": "1"}
    today = datetime.now(UTC).date()
    days = table_rows(page.text, "table-days")
    assert len(days) == 30 and days[today.isoformat()] == "3"
    assert days[(today - timedelta(days=1)).isoformat()] == "0"
    weeks = table_rows(page.text, "table-weeks")
    monday = today - timedelta(days=today.weekday())
    assert len(weeks) == 12 and weeks[f"Week of {monday.isoformat()}"] == "4"
    assert table_rows(page.text, "table-apps") == {"test-assistant": "4"}

    charts = svgs(page.text)
    assert len(charts) == 5
    state = next(c for c in charts if c.get("aria-labelledby", "").startswith("chart-state"))
    legend = [t.text for t in state.iter(SVG + "text")]
    assert "Active: 3" in legend and "Forgotten: 1" in legend


async def test_memories_written_by_each_app_outlive_the_audit_log(
    browser: Browser, owner_mcp: Mcp, clean_db: str
) -> None:
    for text in ("My sister Anna lives in Berlin.", "I drink my coffee black."):
        await owner_mcp.call_tool("remember", {"text": text})
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("DELETE FROM audit_events")  # what the prune does after 90 days
    page = await browser.get("/console/stats")
    assert table_rows(page.text, "table-apps") == {"test-assistant": "2"}


async def test_stats_of_an_empty_store_render(browser: Browser) -> None:
    page = await browser.get("/console/stats")
    assert page.status_code == 200
    assert figure(page.text, "active") == "0" and figure(page.text, "recall_today") == "0"
    assert "No app has written a memory yet." in page.text
    for root in svgs(page.text):
        assert root.find(SVG + "desc") is not None


async def test_another_users_figures_are_not_counted(
    browser: Browser,
    owner_mcp: Mcp,
    conductor: falcon.testing.ASGIConductor,
    console_runtime: Runtime,
    console_settings: Settings,
    clean_db: str,
) -> None:
    bob = assistant_of(conductor, console_runtime, console_settings, make_account(clean_db, "bob"))
    await bob.call_tool("remember", {"text": "Bob's dog is called Rex.", "tags": ["pets"]})
    await bob.call_tool("recall", {"query": "dog"})
    await owner_mcp.call_tool("remember", {"text": "I live in Lisbon.", "tags": ["home"]})
    page = await browser.get("/console/stats")
    assert figure(page.text, "total") == "1" and figure(page.text, "recall_today") == "0"
    assert "pets" not in page.text and "bobs-assistant" not in page.text
