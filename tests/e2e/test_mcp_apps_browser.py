"""MCP Apps pages in a real headless Chromium, hosted as a chat client hosts them.

``apps_host.html`` is a host built from the official SDK: ``AppBridge`` of
``@modelcontextprotocol/ext-apps`` over its ``PostMessageTransport`` (bundled in
``vendor/ext-apps``) speaks the MCP Apps postMessage protocol (SEP-1865) to each
page, loaded from ``resources/read`` into a sandboxed ``srcdoc`` iframe, and the
page's ``tools/call`` goes to ``ownsona serve`` in a real MCP session with a real
token (``apps_host.HostBackend``). The walk: memory cards from ``recall``
(confirm, "this helped", edit, forget and undo, each checked through MCP);
forged ids and another user's ids, and an oversized edit, get the tool's own
documented error and change nothing; near-duplicate groups (keep one, merge);
conflicts (dismiss); the overview from ``memory_stats``. The pages answer the
bridge as the official App does (``ping``; -32601 for ``tools/list`` and
``tools/call``, as they declare no tools), drop messages that are not JSON-RPC,
show partial input, a cancelled call (with "Try again") and a call the host never
answers (``bridge.js``'s stated timeout, on a fast clock), and use the host's font
face; every message both ways conforms to the package's schemas
(``apps_schemas``). Every page: axe-core
(no serious or critical violation), at most 500 px inline with no scrolling
inside, 44 px touch targets, nothing loaded from anywhere, and screenshots at
desktop and phone width in light and dark (``OWNSONA_UPDATE_SCREENSHOTS=1``
refreshes ``docs/screenshots/apps-*.png``).

Needs Debian's ``chromium`` and ``chromium-driver`` and the ``selenium`` extra;
skipped cleanly without them.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .apps_host import HostBackend
from .apps_schemas import problems
from .console_browser import (
    CHROMEDRIVER,
    Assistant,
    chrome_options,
    require_browser,
)
from .server import run_processes

require_browser()

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

from .apps_driver import AppHost  # noqa: E402

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
#: bridge.js's TOOL_CALL_TIMEOUT_MS, as the page states it to the person.
TIMEOUT_SECONDS = 30


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[Any]:
    options = chrome_options(tmp_path / "chromium-profile")
    # Console errors of the host page, read at the end of the walk: none (the apps' come
    # through apps_host.html: chromedriver's log has only the top page's).
    options.set_capability("goog:loggingPrefs", {"browser": "SEVERE"})
    browser = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    browser.set_script_timeout(60)
    try:
        yield browser
    finally:
        browser.quit()


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
                _answers_as_the_official_app(host, me, ids)
                _cleanup(host, me, ids)
                _overview(host, me)
                host.assert_accessible()
                host.keep_conversation()
                assert host.transport_errors == []
                checked = [m for c in host.conversations for m in c]
                assert len(checked) > 100 and not problems(checked), problems(checked)
                errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
                assert errors == [], errors  # the host page's
                assert driver.execute_script("return pageErrors") == []  # the apps'
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


def _answers_as_the_official_app(host: AppHost, me: Assistant, ids: list[int]) -> None:
    """What the official App does and the SDK's host expects, through AppBridge itself."""
    query = {"query": "where does my sister live"}
    host.mount("recall", query)
    for part in OFFICIAL_APP:
        part(host, ids[0], query)


def _host_requests(host: AppHost, sister: int, query: dict[str, Any]) -> None:
    """Requests from the host: ping answered; tools/* refused as "method not found" (the
    page declares no tools), never a fake success or a result the SDK rejects."""
    ping, tools, call = host.in_host(
        """
        const done = arguments[arguments.length - 1];
        const b = window.appBridge;
        const settle = (p) => p.then((result) => ({ result }),
          (e) => ({ code: e.code, message: String(e.message) }));
        Promise.all([settle(b.request({ method: "ping" })), settle(b.listTools({})),
          settle(b.callTool({ name: "recall", arguments: { query: "x" } }))]).then(done);
        """
    )
    assert ping == {"result": {}}
    assert tools["code"] == -32601 and call["code"] == -32601, (tools, call)


def _malformed_messages(host: AppHost, sister: int, query: dict[str, Any]) -> None:
    """Messages that are not JSON-RPC (a notification whose params are no object, a
    request whose id is no id, another version) are dropped unread: the cards stay and
    nothing is answered (the SDK's transport would refuse an answer to an invalid id)."""
    driver = host.driver
    heading = driver.find_element(By.ID, "heading").text
    assert heading.startswith("Memories for")
    # The SDK never sends such messages: the host page posts them to the app itself.
    host.in_host(
        """
        const done = arguments[arguments.length - 1];
        const page = document.querySelector("iframe").contentWindow;
        page.postMessage({ jsonrpc: "2.0", method: "ui/notifications/tool-result", params: "x" }, "*");
        page.postMessage({ jsonrpc: "2.0", id: { not: "an id" }, method: "ping" }, "*");
        page.postMessage({ jsonrpc: "1.0", method: "ui/notifications/tool-cancelled" }, "*");
        window.appBridge.request({ method: "ping" }).then(() => done());
        """
    )
    assert driver.find_element(By.ID, "heading").text == heading
    assert host.card(sister).find_element(By.CSS_SELECTOR, ".text").text == FACTS[0]["text"]
    assert driver.execute_script("return document.getElementById('notice').textContent") == ""
    assert host.host_state()["errors"] == []


def _host_fonts(host: AppHost, sister: int, query: dict[str, Any]) -> None:
    """The host's font face (``styles.css.fonts``) is the page's."""
    families = host.driver.execute_script("return [...document.fonts].map((f) => f.family)")
    assert "HostSans" in [f.strip('"') for f in families], families


def _timeout(host: AppHost, sister: int, query: dict[str, Any]) -> None:
    """A tools/call the host never answers: after the stated timeout (on a clock 100
    times faster) the card says so, the page cancels the request, its buttons work again."""
    driver = host.driver
    driver.execute_script(
        "const real = window.setTimeout;"
        "window.setTimeout = (f, ms, ...a) => real(f, (ms || 0) / 100, ...a);"
    )
    host.in_host("host.hang = true; arguments[arguments.length - 1]()")
    host.card(sister).find_element(By.XPATH, ".//button[.='Confirm']").click()
    host.wait_text(f"TIMEOUT: No answer from the host within {TIMEOUT_SECONDS} s.", timeout=15)
    buttons = host.card(sister).find_elements(By.TAG_NAME, "button")
    assert buttons and all(b.is_enabled() for b in buttons)
    assert host.host_state()["hung"] == ["confirm"]
    host.shoot("apps-cards-timeout-desktop-light.png")
    host.in_host("host.hang = false; arguments[arguments.length - 1]()")
    host.card(sister).find_element(By.XPATH, ".//button[.='Confirm']").click()
    host.wait_text("Confirmed as still true.", timeout=15)


def _partial_input(host: AppHost, sister: int, query: dict[str, Any]) -> None:
    """Partial input: the question as the assistant writes it."""
    host.mount("recall", query, plan=("partial",), partial={"query": "where does my sis"})
    host.wait_text("Searching for \u201cwhere does my sis\u2026\u201d", timeout=15)


def _cancelled(host: AppHost, sister: int, query: dict[str, Any]) -> None:
    """A cancelled call: said, with "Try again", which runs the same tool through the host."""
    driver = host.driver
    host.mount("recall", query, plan=("input", "cancel"))
    host.wait_text("The call was cancelled before a result came (stopped by the user).", 15)
    host.check("cards-cancelled")
    host.shoot("apps-cards-cancelled-desktop-light.png")
    driver.find_element(By.XPATH, "//button[.='Try again']").click()
    host.wait_text(FACTS[0]["text"], timeout=15)
    assert not driver.find_elements(By.XPATH, "//button[.='Try again']")
    calls = host.host_state()["calls"]
    assert [c["params"] for c in calls] == [{"name": "recall", "arguments": query}]
    for tool in ("find_near_duplicates", "memory_stats"):
        host.mount(tool, {}, plan=("input", "cancel"))
        host.wait_text("The call was cancelled before a result came", 15)


#: In order: the first four use the cards page mounted by _answers_as_the_official_app.
OFFICIAL_APP = (
    _host_requests,
    _malformed_messages,
    _host_fonts,
    _timeout,
    _partial_input,
    _cancelled,
)


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
