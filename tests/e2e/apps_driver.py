"""Drives the MCP Apps test host (``apps_host.html``) in Chromium for
``test_mcp_apps_browser``: mounts a tool's page through the official ``AppBridge``,
steps into it, checks the hosts' rules on it, takes screenshots, and keeps every
message the page and the bridge exchanged. Imported only once the browser is known
to be there (``console_browser.require_browser``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from .apps_host import HostBackend
from .console_browser import DESKTOP, PHONE, SCREENSHOTS, accessibility_violations

MAX_INLINE = 500
#: How often a wait looks again (WebDriverWait's default, 0.5 s, idled about half a
#: second after every mount and every action of the walk).
POLL_SECONDS = 0.05


class AppHost:
    """Drives the host page: mounts a tool's page, steps into it, checks the hosts' rules."""

    def __init__(self, driver: Any, backend: HostBackend, url: str, tmp_path: Path) -> None:
        self.driver = driver
        self.backend = backend
        self.url = url
        self.tmp_path = tmp_path
        self.violations: dict[str, list[dict[str, Any]]] = {}
        #: Every message between the pages and the SDK's bridge, each page's in turn.
        self.conversations: list[list[tuple[str, dict[str, Any]]]] = []
        #: What the SDK's transport refused from the pages (not JSON-RPC): none.
        self.transport_errors: list[str] = []
        driver.get(url)

    def mount(
        self,
        tool: str,
        arguments: dict[str, Any],
        theme: str = "light",
        plan: tuple[str, ...] = ("input", "result"),
        partial: dict[str, Any] | None = None,
        result: dict[str, Any] | None = None,
    ) -> None:
        """The model calls ``tool`` (unless ``result`` is the answer it already had); the
        host renders the result with the tool's page.

        ``plan``: what the host sends once the page is initialized (apps_host.html).
        """
        if result is None and "result" in plan:
            result = self.backend.call(tool, arguments)
        call = {
            "tool": self.backend.tools[tool],
            "arguments": arguments,
            "partial": partial,
            "result": result,
        }
        driver = self.driver
        driver.switch_to.default_content()
        self.keep_conversation()
        driver.execute_script(
            "mountApp(arguments[0], arguments[1], arguments[2], arguments[3])",
            self.backend.page_of(tool),
            call,
            theme,
            list(plan),
        )
        WebDriverWait(driver, 20, poll_frequency=POLL_SECONDS).until(
            lambda d: d.execute_script("return host.resultSent && host.sizes.length > 0")
        )
        driver.switch_to.frame(driver.find_element(By.TAG_NAME, "iframe"))

    def keep_conversation(self) -> None:
        """The shown page's messages, kept before the next page replaces them."""
        self.driver.switch_to.default_content()
        sent, errors = self.driver.execute_script("return [host.sent, host.errors]")
        if sent:
            self.conversations.append([(m["from"], m["message"]) for m in sent])
        self.transport_errors += errors

    def in_host(self, script: str, *args: Any) -> Any:
        """An async script in the host page (its last argument is the callback)."""
        driver = self.driver
        driver.switch_to.default_content()
        try:
            return driver.execute_async_script(script, *args)
        finally:
            driver.switch_to.frame(driver.find_element(By.TAG_NAME, "iframe"))

    def host_state(self) -> dict[str, Any]:
        driver = self.driver
        driver.switch_to.default_content()
        # Not host.sent: every message so far, tool results included (keep_conversation).
        state: dict[str, Any] = driver.execute_script(
            "const { sent, ...state } = host; return state"
        )
        driver.switch_to.frame(driver.find_element(By.TAG_NAME, "iframe"))
        return state

    def wait_text(self, text: str, timeout: float = 60) -> None:
        main = self.driver.find_element(By.TAG_NAME, "main")
        try:
            WebDriverWait(self.driver, timeout, poll_frequency=POLL_SECONDS).until(
                lambda d: text in main.text
            )
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
        """``apps-<name>-<desktop|phone>-<light|dark>.png``: the app as the host shows it
        (one result of the tool, shown at each width in each theme)."""
        result = self.backend.call(tool, arguments)
        for theme in ("light", "dark"):
            for label, (width, height) in (("desktop", (760, 900)), ("phone", PHONE)):
                self.driver.set_window_size(width, height)
                self.mount(tool, arguments, theme, result=result)
                self.check(f"{name}-{label}-{theme}")
                self.shoot(f"apps-{name}-{label}-{theme}.png")
        self.driver.set_window_size(*DESKTOP)

    def shoot(self, file_name: str) -> None:
        """The host's iframe as it stands, into tmp_path (and docs/screenshots on request)."""
        driver = self.driver
        driver.switch_to.default_content()
        target = self.tmp_path / file_name
        driver.find_element(By.TAG_NAME, "iframe").screenshot(str(target))
        assert target.stat().st_size > 1000
        if os.environ.get("OWNSONA_UPDATE_SCREENSHOTS") == "1":
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(target, SCREENSHOTS / target.name)
        driver.switch_to.frame(driver.find_element(By.TAG_NAME, "iframe"))

    def assert_accessible(self) -> None:
        failing = {name: v for name, v in self.violations.items() if v}
        assert not failing, f"serious or critical accessibility violations: {failing}"
