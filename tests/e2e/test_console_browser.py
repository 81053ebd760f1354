"""The owner's console in a real headless Chromium, against ``ownsona serve``.

One walk through what a person does: sign in; find a fact with the search box;
edit its tags; forget one and see it gone from recall over MCP; resolve a
duplicate group; disconnect an app and see its token refused at /mcp; import a
small ChatGPT export and find one of its facts. Every page is checked with
axe-core (no serious or critical violation), for no sideways scroll at phone
width, and photographed at desktop and phone width
(``OWNSONA_UPDATE_SCREENSHOTS=1`` refreshes ``docs/screenshots/console-*.png``).

Needs Debian's ``chromium`` and ``chromium-driver`` and the ``selenium`` extra;
skipped cleanly without them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .console_browser import (
    CHROMEDRIVER,
    PHONE,
    Assistant,
    accessibility_violations,
    chrome_options,
    foreign_requests,
    no_horizontal_scroll,
    require_browser,
    screenshots,
)
from .server import run_processes

require_browser()

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import WebDriverException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

USERNAME, PASSWORD = "e2e", "correct horse battery"
EXPORT = (
    Path(__file__).resolve().parents[1] / "fixtures" / "chat_exports" / "chatgpt_conversations.json"
)
FACTS = (
    {"text": "My sister Ana lives in Porto.", "tags": ["family"]},
    {"text": "I am allergic to peanuts.", "tags": ["health"]},
    {"text": "My favourite tea is genmaicha.", "tags": ["food"]},
    {"text": "The user's car is a red 2019 Honda Civic.", "tags": ["car"]},
)
DUPLICATES = (
    {"text": "My dentist is Dr. Okafor on Elm Street.", "tags": ["health"]},
    {"text": "My dentist is Dr. Okafor, on Elm Street.", "tags": ["health"]},
)


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


def _gone(element: Any) -> Any:
    """A navigation away from ``element``'s page (see test_oauth_browser._gone)."""

    def check(_driver: Any) -> bool:
        try:
            element.is_enabled()
        except WebDriverException:
            return True
        return False

    return check


def _submit(driver: Any, button: Any, *, confirm: bool = False) -> None:
    """Click a submit button (answering its confirmation) and wait for the next page."""
    button.click()
    if confirm:
        WebDriverWait(driver, 10).until(lambda d: _alert(d) is not None)
        alert = _alert(driver)
        assert alert is not None
        alert.accept()
    WebDriverWait(driver, 20).until(_gone(button))


def _alert(driver: Any) -> Any:
    try:
        return driver.switch_to.alert
    except WebDriverException:
        return None


class PageChecks:
    """axe-core, phone width and screenshots of every page the walk visits."""

    def __init__(self, driver: Any, tmp_path: Path) -> None:
        self.driver = driver
        self.tmp_path = tmp_path
        self.seen: dict[str, list[dict[str, Any]]] = {}

    def check(self, name: str) -> None:
        driver = self.driver
        assert not foreign_requests(driver), f"{name} loaded another site's resources"
        self.seen[name] = accessibility_violations(driver)
        driver.set_window_size(*PHONE)
        assert no_horizontal_scroll(driver), f"{name} scrolls sideways at phone width"
        screenshots(driver, self.tmp_path, name)

    def assert_clean(self) -> None:
        failing = {name: v for name, v in self.seen.items() if v}
        assert not failing, f"serious or critical accessibility violations: {failing}"


def test_the_console_walk(tmp_path: Path, dsn: str, clean_db: str, driver: Any) -> None:
    with run_processes(tmp_path, {"DATABASE_URL": dsn}) as server:
        assistant = Assistant(server.url, server.token())
        try:
            _walk(server, assistant, driver, tmp_path)
        finally:
            assistant.close()


def _walk(server: Any, assistant: Assistant, driver: Any, tmp_path: Path) -> None:
    url = server.url
    ids = [assistant.call("remember", fact)["memory_id"] for fact in (*FACTS, *DUPLICATES)]
    sister, peanuts = ids[0], ids[1]
    pages = PageChecks(driver, tmp_path)

    # Signed out: the console sends the browser to sign in, and back where it was going.
    driver.get(f"{url}/console/memories")
    assert "/console/sign-in" in driver.current_url
    pages.check("sign-in")
    driver.find_element(By.ID, "username").send_keys(USERNAME)
    driver.find_element(By.ID, "password").send_keys(PASSWORD)
    _submit(driver, driver.find_element(By.CSS_SELECTOR, "main button[type=submit]"))
    assert driver.current_url.endswith("/console/memories")
    assert "My favourite tea is genmaicha." in driver.page_source
    pages.check("memories")

    # The search box finds a fact by meaning.
    box = driver.find_element(By.ID, "q")
    box.send_keys("where does my sister live")
    _submit(driver, driver.find_element(By.CSS_SELECTOR, "form[role=search] button[type=submit]"))
    first_match = driver.find_element(By.CSS_SELECTOR, "main table tbody tr")
    assert "My sister Ana lives in Porto." in first_match.text
    pages.check("search")

    # Its page: edit its tags; an assistant sees them.
    driver.get(f"{url}/console/memories/{sister}")
    pages.check("memory")
    tags = driver.find_element(By.ID, "e-tags")
    tags.clear()
    tags.send_keys("family, porto")
    _submit(driver, tags.find_element(By.XPATH, "ancestor::form//button[@type='submit']"))
    assert assistant.call("get_memory", {"id": sister})["memory"]["tags"] == ["family", "porto"]

    # Forget one from its page: recall over MCP no longer returns it.
    driver.get(f"{url}/console/memories/{peanuts}")
    forget = driver.find_element(
        By.XPATH, "//form[contains(@action, '/forget') and not(.//input[@name='hard'])]//button"
    )
    _submit(driver, forget, confirm=True)
    found = assistant.call("recall", {"query": "what am I allergic to"})["matches"]
    assert peanuts not in [m["id"] for m in found]

    # Resolve a duplicate group: keep the first, the other is forgotten in its favour.
    # The first view starts the scan and says so; the page's script reloads it once the
    # scan has ended (without the script, its "Show the result" link does the same).
    driver.get(f"{url}/console/cleanup")
    assert "Scanning…" in driver.page_source or "Dr. Okafor" in driver.page_source
    WebDriverWait(driver, 60).until(lambda d: "Dr. Okafor" in d.page_source)
    assert "Scanned just now" in driver.page_source
    pages.check("cleanup")
    keep = driver.find_element(By.CSS_SELECTOR, "button[name=choose][value^='keep:']")
    kept = int(keep.get_attribute("value").split(":")[1])
    _submit(driver, keep, confirm=True)
    other = ids[5] if kept == ids[4] else ids[4]
    retired = assistant.call("get_memory", {"id": other})["memory"]
    assert retired["deleted_at"] is not None and retired["replaced_by_id"] == kept
    assert f"/console/memories/{other}" not in driver.page_source  # the group is gone

    driver.get(f"{url}/console/graph?entity=Ana")
    pages.check("graph")
    driver.get(f"{url}/console/activity")
    assert "remember" in driver.page_source
    pages.check("activity")
    driver.get(f"{url}/console/stats")
    pages.check("stats")

    # Disconnect the assistant's token: its next call at /mcp is refused.
    driver.get(f"{url}/console/apps")
    pages.check("apps")
    disconnect = driver.find_element(By.XPATH, "//form[contains(@action, '/tokens/')]//button")
    _submit(driver, disconnect, confirm=True)
    refused = assistant.post("count_memories", {})
    assert refused.status_code == 401, refused.text

    # Import a small ChatGPT export (no extractor here: the user's own messages).
    driver.get(f"{url}/console/account")
    pages.check("account")
    driver.get(f"{url}/console/account/import-chat")
    pages.check("import-chat")
    driver.find_element(By.ID, "file").send_keys(str(EXPORT))
    _submit(driver, driver.find_element(By.CSS_SELECTOR, "main form button[type=submit]"))
    found = driver.find_element(By.CSS_SELECTOR, "dl.fields").text
    assert "ChatGPT export" in found and "Conversations\n2" in found, found
    pages.check("import-chat-found")
    confirm = driver.find_element(By.XPATH, "//form[.//input[@name='step' and @value='confirm']]")
    _submit(driver, confirm.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    WebDriverWait(driver, 60).until(lambda d: "Done." in d.page_source)
    pages.check("job")
    fresh = Assistant(url, server.token())
    try:
        found = fresh.call("recall", {"query": "what is my sourdough starter called"})["matches"]
        assert "Clint" in found[0]["text"]
        assert found[0]["source_provider"] == "chatgpt-import"
    finally:
        fresh.close()
    pages.assert_clean()
