"""MCP Apps pages in a real headless Chromium, hosted as a chat client hosts them.

``apps_host.html`` speaks the MCP Apps postMessage protocol (SEP-1865) to each
page, loaded from ``resources/read`` into a sandboxed iframe, and forwards the
page's ``tools/call`` to ``ownsona serve`` in a real MCP session with a real
token (``apps_host.HostBackend``). The walk: memory cards from ``recall``
(confirm, "this helped", edit, forget and undo, each checked through MCP);
forged ids and another user's ids, and an oversized edit, get the tool's own
documented error and change nothing; near-duplicate groups (keep one, merge);
conflicts (dismiss); the overview from ``memory_stats``. Every page: axe-core
(no serious or critical violation), at most 500 px inline with no scrolling
inside, 44 px touch targets, nothing loaded from anywhere, and screenshots at
desktop and phone width in light and dark (``OWNSONA_UPDATE_SCREENSHOTS=1``
refreshes ``docs/screenshots/apps-*.png``).

Needs Debian's ``chromium`` and ``chromium-driver`` and the ``selenium`` extra;
skipped cleanly without them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .apps_host import HostBackend
from .console_browser import (
    CHROMEDRIVER,
    DESKTOP,
    PHONE,
    SCREENSHOTS,
    Assistant,
    accessibility_violations,
    chrome_options,
    require_browser,
)
from .server import run_processes

require_browser()

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import TimeoutException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

FACTS = (
    {"text": "My sister Ana lives in Porto.", "tags": ["family"]},
    {"text": "My brother Rui lives in Braga and teaches maths.", "tags": ["family"]},
    {"text": "I am allergic to peanuts.", "tags": ["health"]},
    {"text": "My favourite tea is genmaicha.", "tags": ["food"]},
)
DUPLICATES = (
    {"text": "My dentist is Dr. Okafor on Elm Street.", "tags": ["health"]},
    {"text": "My dentist is Dr. Okafor, on Elm Street.", "tags": ["health"]},
    {"text": "My favourite colour is dark green.", "tags": ["preferences"]},
    {"text": "My favourite colour is dark green!", "tags": ["preferences"]},
)
CONFLICTING = (
    {"text": "I live in Lisbon.", "tags": ["home"]},
    {"text": "I live in Porto.", "tags": ["home"]},
)
OTHERS_FACT = {"text": "My sister Bea lives in Faro.", "tags": ["family"]}
MAX_TEXT_CHARS = 16000  # the default, which the server runs with here
MAX_INLINE = 500


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[Any]:
    browser = webdriver.Chrome(
        options=chrome_options(tmp_path / "chromium-profile"), service=Service(str(CHROMEDRIVER))
    )
    browser.set_script_timeout(60)
    try:
        yield browser
    finally:
        browser.quit()


class AppHost:
    """Drives the host page: mounts a tool's page, steps into it, checks the hosts' rules."""

    def __init__(self, driver: Any, backend: HostBackend, url: str, tmp_path: Path) -> None:
        self.driver = driver
        self.backend = backend
        self.url = url
        self.tmp_path = tmp_path
        self.violations: dict[str, list[dict[str, Any]]] = {}
        driver.get(url)

    def mount(self, tool: str, arguments: dict[str, Any], theme: str = "light") -> None:
        """The model calls ``tool``; the host renders its result with the tool's page."""
        result = self.backend.call(tool, arguments)
        call = {"tool": self.backend.tools[tool], "arguments": arguments, "result": result}
        driver = self.driver
        driver.switch_to.default_content()
        driver.execute_script(
            "mountApp(arguments[0], arguments[1], arguments[2])",
            self.backend.page_of(tool),
            call,
            theme,
        )
        WebDriverWait(driver, 20).until(
            lambda d: d.execute_script("return host.resultSent && host.sizes.length > 0")
        )
        driver.switch_to.frame(driver.find_element(By.TAG_NAME, "iframe"))

    def host_state(self) -> dict[str, Any]:
        driver = self.driver
        driver.switch_to.default_content()
        state: dict[str, Any] = driver.execute_script("return host")
        driver.switch_to.frame(driver.find_element(By.TAG_NAME, "iframe"))
        return state

    def wait_text(self, text: str, timeout: float = 60) -> None:
        main = self.driver.find_element(By.TAG_NAME, "main")
        try:
            WebDriverWait(self.driver, timeout).until(lambda d: text in main.text)
        except TimeoutException:
            raise AssertionError(f"{text!r} never shown; the page says: {main.text}") from None

    def card(self, memory_id: int) -> Any:
        return self.driver.find_element(By.CSS_SELECTOR, f"li.card[data-id='{memory_id}']")

    def check(self, name: str) -> None:
        """The hosts' rules on the page as it stands."""
        driver = self.driver
        self.violations[name] = accessibility_violations(driver)
        page = driver.execute_script(
            """
            const nested = [...document.querySelectorAll('body *')].filter((e) => {
              const s = getComputedStyle(e);
              return e.tagName !== 'TEXTAREA' && /(auto|scroll)/.test(s.overflow + s.overflowY)
                && e.scrollHeight > e.clientHeight + 1;
            }).map((e) => e.tagName + '.' + e.className);
            const small = [...document.querySelectorAll('button, input, textarea, a')]
              .filter((e) => e.offsetParent !== null)
              .map((e) => e.getBoundingClientRect())
              .filter((r) => r.height < 44 || r.width < 44).length;
            const foreign = performance.getEntriesByType('resource').map((e) => e.name);
            return {height: Math.ceil(document.body.getBoundingClientRect().height), nested,
                    small, foreign, sideways: document.documentElement.scrollWidth > innerWidth + 1};
            """
        )
        assert page["height"] <= MAX_INLINE, (name, page)
        assert not page["nested"], (name, page)
        assert page["small"] == 0, (name, page)
        assert not page["foreign"], (name, page)
        assert not page["sideways"], (name, page)
        sizes = self.host_state()["sizes"]
        assert sizes and max(s["height"] for s in sizes) <= MAX_INLINE, (name, sizes)

    def screenshots(self, name: str, tool: str, arguments: dict[str, Any]) -> None:
        """``apps-<name>-<desktop|phone>-<light|dark>.png``: the app as the host shows it."""
        for theme in ("light", "dark"):
            for label, (width, height) in (("desktop", (760, 900)), ("phone", PHONE)):
                self.driver.set_window_size(width, height)
                self.mount(tool, arguments, theme)
                self.check(f"{name}-{label}-{theme}")
                self.driver.switch_to.default_content()
                target = self.tmp_path / f"apps-{name}-{label}-{theme}.png"
                self.driver.find_element(By.TAG_NAME, "iframe").screenshot(str(target))
                assert target.stat().st_size > 1000
                if os.environ.get("OWNSONA_UPDATE_SCREENSHOTS") == "1":
                    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(target, SCREENSHOTS / target.name)
        self.driver.set_window_size(*DESKTOP)

    def assert_accessible(self) -> None:
        failing = {name: v for name, v in self.violations.items() if v}
        assert not failing, f"serious or critical accessibility violations: {failing}"


def _add_user(server: Any, name: str) -> str:
    created = subprocess.run(
        [sys.executable, "-m", "scripts.cli", "user", "add", name],
        input="another long password\n",
        env=server.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert created.returncode == 0, created.stderr
    return str(server.token(name))


def test_mcp_apps_in_a_host(tmp_path: Path, dsn: str, clean_db: str, driver: Any) -> None:
    with run_processes(tmp_path, {"DATABASE_URL": dsn}) as server:
        token = server.token()
        me = Assistant(server.url, token)
        other = Assistant(server.url, _add_user(server, "other"))
        backend = HostBackend(server.url, token)
        try:
            assert "io.modelcontextprotocol/ui" in backend.capabilities["extensions"]
            ids = [me.call("remember", fact)["memory_id"] for fact in (*FACTS, *DUPLICATES)]
            for fact in CONFLICTING:
                me.call("remember", fact)
            others_id = other.call("remember", OTHERS_FACT)["memory_id"]
            with backend.serve() as url:
                host = AppHost(driver, backend, url, tmp_path)
                _cards(host, me, other, ids, others_id)
                _cleanup(host, me, ids)
                _overview(host, me)
                host.assert_accessible()
        finally:
            backend.close()
            me.close()
            other.close()


def _error_of(assistant: Assistant, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    reply = assistant.post(tool, arguments)
    result = reply.json()["result"]
    assert result["isError"] is True, result
    return result["structuredContent"]["error"]  # type: ignore[no-any-return]


def _cards(host: AppHost, me: Assistant, other: Assistant, ids: list[int], others_id: int) -> None:
    driver = host.driver
    sister, brother, peanuts = ids[:3]
    query = {"query": "where does my sister live"}
    host.screenshots("cards", "recall", query)
    host.mount("recall", query)
    assert host.card(sister).find_element(By.CSS_SELECTOR, ".text").text == FACTS[0]["text"]
    assert "% similar" in host.card(sister).text
    assert host.host_state()["log"][0] == "ui/initialize"

    # Confirm and "this helped": through the host, seen through MCP.
    host.card(sister).find_element(By.XPATH, ".//button[.='Confirm']").click()
    host.wait_text("Confirmed as still true.")
    host.card(sister).find_element(By.XPATH, ".//button[.='This helped']").click()
    host.wait_text("it will rank higher")
    fresh = me.call("get_memory", {"id": sister})["memory"]
    # confirm counts as positive feedback too (SUPPLEMENT §4): two steps.
    assert fresh["salience"] > 0 and fresh["use_count"] == 2
    calls = [c["params"]["name"] for c in host.host_state()["calls"]]
    assert calls == ["confirm", "reinforce"]

    # Edit text and tags: the store has the new text and the normalised tags.
    host.card(brother).find_element(By.XPATH, ".//button[.='Edit']").click()
    text = driver.find_element(By.ID, f"text-{brother}")
    text.clear()
    text.send_keys("My brother Rui lives in Braga and teaches physics.")
    tags = driver.find_element(By.ID, f"tags-{brother}")
    tags.clear()
    tags.send_keys("Family, Braga")
    driver.find_element(By.XPATH, "//button[.='Save']").click()
    host.wait_text("Saved.")
    edited = me.call("get_memory", {"id": brother})["memory"]
    assert edited["text"] == "My brother Rui lives in Braga and teaches physics."
    assert edited["tags"] == ["family", "braga"]
    assert "teaches physics" in host.card(brother).text
    host.check("cards-after-edit")

    # An oversized edit: the tool's INVALID_INPUT, shown on the card; nothing changes.
    host.mount("recall", query)
    host.card(brother).find_element(By.XPATH, ".//button[.='Edit']").click()
    driver.execute_script(
        "document.getElementById(arguments[0]).value = 'x'.repeat(arguments[1])",
        f"text-{brother}",
        MAX_TEXT_CHARS + 1,
    )
    driver.find_element(By.XPATH, "//button[.='Save']").click()
    expected = _error_of(me, "update_memory", {"id": brother, "text": "x" * (MAX_TEXT_CHARS + 1)})
    assert expected["code"] == "INVALID_INPUT"
    host.wait_text(f"INVALID_INPUT: {expected['message']}")
    assert me.call("get_memory", {"id": brother})["memory"]["text"] == edited["text"]

    # Forget, then undo while the card is shown: recall finds it again.
    host.mount("recall", {"query": "what am I allergic to"})
    host.card(peanuts).find_element(By.XPATH, ".//button[.='Forget']").click()
    host.wait_text("Forgotten.")
    assert me.call("get_memory", {"id": peanuts})["memory"]["deleted_at"] is not None
    recalled = me.call("recall", {"query": "what am I allergic to"})["matches"]
    assert peanuts not in [m["id"] for m in recalled]
    host.check("cards-forgotten")
    driver.find_element(By.XPATH, "//button[.='Undo']").click()
    host.wait_text("Restored (now #")
    recalled = me.call("recall", {"query": "what am I allergic to"})["matches"]
    (restored,) = [m for m in recalled if m["text"] == FACTS[2]["text"]]
    assert restored["tags"] == ["health"]
    tombstone = me.call("get_memory", {"id": peanuts})["memory"]
    assert tombstone["replaced_by_id"] == restored["id"]

    # Forged ids: another user's memory and one that does not exist. The page names them
    # as the card's id; the tool answers as it answers the model, and nothing changes.
    host.mount("recall", query)

    def forge(real: int, forged: int) -> None:
        driver.execute_script(
            'document.querySelector("li.card[data-id=\'" + arguments[0] + "\']")'
            ".setAttribute('data-id', arguments[1])",
            real,
            forged,
        )

    for forged in (others_id, 987654321):
        expected = _error_of(
            me, "forget", {"id": forged, "reason": "Forgotten from a memory card."}
        )
        assert expected["code"] == "NOT_FOUND"
        forge(sister, forged)
        host.card(forged).find_element(By.XPATH, ".//button[.='Forget']").click()
        host.wait_text(f"NOT_FOUND: {expected['message']}")
        host.card(forged).find_element(By.XPATH, ".//button[.='Edit']").click()  # re-drawn
        forge(sister, forged)
        host.card(forged).find_element(By.TAG_NAME, "textarea").send_keys(" (changed)")
        driver.find_element(By.XPATH, "//button[.='Save']").click()
        expected = _error_of(me, "update_memory", {"id": forged, "text": "changed"})
        host.wait_text(f"NOT_FOUND: {expected['message']}")
        driver.find_element(By.XPATH, "//button[.='Cancel']").click()
    theirs = other.call("get_memory", {"id": others_id})["memory"]
    assert theirs["deleted_at"] is None and theirs["text"] == OTHERS_FACT["text"]
    mine = me.call("get_memory", {"id": sister})["memory"]
    assert mine["deleted_at"] is None and mine["text"] == FACTS[0]["text"]


def _cleanup(host: AppHost, me: Assistant, ids: list[int]) -> None:
    driver = host.driver
    dentist_a, dentist_b, green_a, green_b = ids[4:8]
    host.screenshots("duplicates", "find_near_duplicates", {})
    host.mount("find_near_duplicates", {})
    host.wait_text("groups of near duplicates")

    # Keep one: the other is forgotten in its favour.
    group = driver.find_element(By.CSS_SELECTOR, f"li.card[data-ids*='{dentist_a}']")
    group.find_element(By.CSS_SELECTOR, f"li[data-id='{dentist_a}'] button").click()
    host.wait_text(f"Kept #{dentist_a}; forgot #{dentist_b}.")
    retired = me.call("get_memory", {"id": dentist_b})["memory"]
    assert retired["deleted_at"] is not None and retired["replaced_by_id"] == dentist_a

    # Merge: one new memory replaces the group (remember with supersedes).
    group = driver.find_element(By.CSS_SELECTOR, f"li.card[data-ids*='{green_a}']")
    group.find_element(By.XPATH, ".//button[.='Merge…']").click()
    box = driver.find_element(By.CSS_SELECTOR, "[role=group] textarea")
    box.clear()
    box.send_keys("My favourite colour is dark green (moss).")
    host.check("duplicates-merging")
    driver.find_element(By.XPATH, "//button[.='Save merged']").click()
    host.wait_text("Merged into #")
    for old in (green_a, green_b):
        row = me.call("get_memory", {"id": old})["memory"]
        assert row["deleted_at"] is not None
    found = me.call("text_search", {"text": "dark green (moss)"})["memories"]
    assert [m["tags"] for m in found] == [["preferences"]]

    host.screenshots("conflicts", "find_conflicts", {})
    host.mount("find_conflicts", {})
    host.wait_text("I live in Lisbon.")
    before = me.call("count_memories", {})["count"]
    driver.find_element(By.XPATH, "//button[.='Dismiss']").click()
    host.wait_text("Dismissed (nothing changed).")
    assert me.call("count_memories", {})["count"] == before


def _overview(host: AppHost, me: Assistant) -> None:
    host.screenshots("overview", "memory_stats", {})
    host.mount("memory_stats", {})
    host.wait_text("Latest memories")
    latest = me.call("list_memories", {"limit": 1})["memories"][0]
    assert latest["text"] in host.driver.find_element(By.ID, "latest").text
    stats = me.call("memory_stats", {})
    tiles = host.driver.find_element(By.ID, "stats").text
    assert str(stats["active"]) in tiles
    calls = host.host_state()["calls"]
    assert [c["params"]["name"] for c in calls] == ["list_memories"]
