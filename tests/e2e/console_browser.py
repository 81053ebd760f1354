"""Helpers of the console's browser test: Chromium, axe-core, screenshots, MCP calls.

Needs Debian's ``chromium`` and ``chromium-driver`` and the ``selenium`` test
extra (the test module skips cleanly without them). axe-core is vendored in
``tests/e2e/vendor/axe-core`` (see its NOTICE.md) and injected into each page
through WebDriver, which the page's Content-Security-Policy does not govern.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"
DESKTOP = (1280, 900)
PHONE = (390, 844)
#: axe-core impacts that fail the test.
BLOCKING = frozenset({"serious", "critical"})


def require_browser() -> None:
    """Skip the calling test module, saying why, without selenium or Debian's Chromium.

    Called at the top of a browser test module, before it imports selenium.
    """
    pytest.importorskip("selenium", reason="the selenium test extra is not installed")
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip(
            "Chromium is absent (apt-get install -y chromium chromium-driver)",
            allow_module_level=True,
        )


def chrome_options(profile: Path) -> Any:
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={DESKTOP[0]},{DESKTOP[1]}",
        "--force-device-scale-factor=1",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    return options


def accessibility_violations(driver: Any) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the current page (WCAG 2.x A/AA)."""
    if not driver.execute_script("return typeof window.axe !== 'undefined'"):
        driver.execute_script(AXE.read_text())
    result = driver.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a',
            'wcag21aa', 'best-practice']}})
          .then(r => done(JSON.stringify(r.violations)))
          .catch(e => done(JSON.stringify([{id: 'axe-error', impact: 'critical',
            help: String(e), nodes: []}])));
        """
    )
    violations = json.loads(result)
    return [
        {
            "id": v["id"],
            "impact": v["impact"],
            "help": v["help"],
            "targets": [n.get("target") for n in v.get("nodes", [])][:5],
        }
        for v in violations
        if v.get("impact") in BLOCKING
    ]


def no_horizontal_scroll(driver: Any) -> bool:
    """The page fits the viewport's width (wide tables scroll inside their own box)."""
    return bool(
        driver.execute_script(
            "return document.documentElement.scrollWidth <= window.innerWidth + 1"
        )
    )


def foreign_requests(driver: Any) -> list[str]:
    """Resources the page loaded from anywhere but its own origin (there must be none)."""
    return list(
        driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
            ".filter(u => new URL(u).origin !== location.origin)"
        )
    )


def screenshots(driver: Any, tmp_path: Path, name: str) -> None:
    """``console-<name>-desktop.png`` and ``-phone.png``; copied to docs/screenshots when
    ``OWNSONA_UPDATE_SCREENSHOTS=1``. Full page height, so a whole page is seen."""
    for label, (width, height) in (("desktop", DESKTOP), ("phone", PHONE)):
        driver.set_window_size(width, height)
        full = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(width, min(max(height, int(full) + 20), 4000))
        target = tmp_path / f"console-{name}-{label}.png"
        driver.save_screenshot(str(target))
        assert target.stat().st_size > 1000
        if os.environ.get("OWNSONA_UPDATE_SCREENSHOTS") == "1":
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(target, SCREENSHOTS / target.name)
    driver.set_window_size(*DESKTOP)


class Assistant:
    """An assistant of the user's over /mcp with a bearer token."""

    def __init__(self, url: str, token: str) -> None:
        self.http = httpx.Client(
            base_url=url,
            timeout=60,
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-11-25",
            },
        )
        self._id = 0

    def post(self, tool: str, arguments: dict[str, Any]) -> httpx.Response:
        self._id += 1
        return self.http.post(
            "/mcp",
            json={
                "jsonrpc": "2.0",
                "id": self._id,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            },
        )

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        reply = self.post(tool, arguments)
        assert reply.status_code == 200, reply.text
        result = reply.json()["result"]
        assert result["isError"] is False, result
        return result["structuredContent"]  # type: ignore[no-any-return]

    def close(self) -> None:
        self.http.close()
