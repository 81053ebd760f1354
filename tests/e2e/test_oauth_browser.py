"""The sign-in and consent pages in a real headless Chromium, against ``ownsona serve``.

Needs Debian's ``chromium`` and ``chromium-driver`` (``apt-get install -y
chromium chromium-driver``) and the ``selenium`` test extra; skipped
cleanly without them. The browser runs at a phone's size. Set
``OWNSONA_UPDATE_SCREENSHOTS=1`` to refresh ``docs/screenshots/*.png``.
"""

from __future__ import annotations

import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from tests.auth.oauth_flow import oauth_clean, pkce_pair, query_of

from .console_browser import CHROMEDRIVER, CHROMIUM, require_browser
from .server import free_port, run_processes

__all__ = ["oauth_clean"]

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
USERNAME, PASSWORD = "e2e", "correct horse battery"

require_browser()

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import WebDriverException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


class _Callback(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        _Callback.hits.append(self.path)
        body = b"<!doctype html><title>Connected</title><p>Connected.</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def callback_server() -> Iterator[str]:
    """Stands in for a native client's loopback redirect listener."""
    _Callback.hits = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _Callback)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/callback"
    server.shutdown()
    server.server_close()


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=412,915",
        "--force-device-scale-factor=1",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(arg)
    browser = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    try:
        yield browser
    finally:
        browser.quit()


def _screenshot(driver: Any, tmp_path: Path, name: str) -> None:
    target = tmp_path / name
    driver.save_screenshot(str(target))
    assert target.stat().st_size > 1000
    if os.environ.get("OWNSONA_UPDATE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(target, SCREENSHOTS / name)


def _fill(driver: Any, username: str, password: str) -> None:
    """Type and submit, then wait until the browser has left the old page."""
    user = driver.find_element(By.ID, "username")
    user.clear()
    user.send_keys(username)
    driver.find_element(By.ID, "password").send_keys(password)
    button = driver.find_element(By.CSS_SELECTOR, "button[type=submit]")
    button.click()
    WebDriverWait(driver, 10).until(_gone(button))


def _gone(element: Any) -> Any:
    """Like ``staleness_of``, but a navigation caught mid-check also counts as gone:
    ChromeDriver then answers "Node with given id does not belong to the document", a
    plain WebDriverException rather than StaleElementReferenceException."""

    def check(_driver: Any) -> bool:
        try:
            element.is_enabled()
        except WebDriverException:  # StaleElementReferenceException is one too
            return True
        return False

    return check


async def test_sign_in_and_allow_in_chromium(
    tmp_path: Path, dsn: str, oauth_clean: str, callback_server: str, driver: Any
) -> None:
    with run_processes(tmp_path, {"DATABASE_URL": dsn}) as server:
        async with httpx.AsyncClient(timeout=30) as http:
            registered = await http.post(
                f"{server.url}/oauth/register",
                json={
                    "client_name": "Claude Code",
                    "redirect_uris": [callback_server],
                },
            )
        assert registered.status_code == 201, registered.text
        client_id = registered.json()["client_id"]
        verifier, challenge = pkce_pair()
        params = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": callback_server,
            "state": "xyz-state",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "scope": "memory:read memory:write",
            "resource": f"{server.url}/mcp",
        }
        driver.get(f"{server.url}/oauth/authorize?{urlencode(params)}")
        assert "Sign in to connect Claude Code" in driver.page_source
        _screenshot(driver, tmp_path, "login.png")

        # A wrong password: the same page again, with an error, and no way through.
        _fill(driver, USERNAME, "not the password")
        alert = driver.find_element(By.CSS_SELECTOR, "[role=alert]")
        assert alert.text == "Incorrect username or password."
        assert driver.find_element(By.ID, "username").get_attribute("value") == USERNAME
        _screenshot(driver, tmp_path, "login-error.png")

        _fill(driver, USERNAME, PASSWORD)
        WebDriverWait(driver, 10).until(lambda d: "Allow Claude Code" in d.page_source)
        assert "memory:write" in driver.page_source
        _screenshot(driver, tmp_path, "consent.png")

        driver.find_element(By.CSS_SELECTOR, "button[value=allow]").click()
        WebDriverWait(driver, 10).until(lambda d: d.current_url.startswith(callback_server))
        query = query_of(driver.current_url)
        assert query["state"] == "xyz-state" and query["iss"] == server.url
        assert _Callback.hits and "code=" in _Callback.hits[0]

        async with httpx.AsyncClient(timeout=30) as http:
            exchanged = await http.post(
                f"{server.url}/oauth/token",
                data={
                    "grant_type": "authorization_code",
                    "code": query["code"],
                    "redirect_uri": callback_server,
                    "client_id": client_id,
                    "code_verifier": verifier,
                    "resource": f"{server.url}/mcp",
                },
            )
        assert exchanged.status_code == 200, exchanged.text
        assert exchanged.json()["token_type"] == "Bearer"

        # Signed in now: the next authorization skips the password, still asks consent
        # for a client this user has not allowed.
        async with httpx.AsyncClient(timeout=30) as http:
            other = await http.post(
                f"{server.url}/oauth/register",
                json={
                    "client_name": "MCP Inspector",
                    "redirect_uris": [callback_server],
                },
            )
        params.update(client_id=other.json()["client_id"])
        driver.get(f"{server.url}/oauth/authorize?{urlencode(params)}")
        assert "Allow MCP Inspector" in driver.page_source
        assert not driver.find_elements(By.ID, "password")
