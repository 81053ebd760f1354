"""The sign-in form under repeated failures: 429 with Retry-After, for real and unknown users."""

from __future__ import annotations

from typing import Any

import pytest

from api.oauth import OAuthOptions
from auth.throttle import ThrottlePolicy
from tests.auth.oauth_flow import (
    PASSWORD,
    Browser,
    alice_account,
    browser,
    count,
    oauth_clean,
    oauth_http,
    register,
)

__all__ = ["alice_account", "browser", "oauth_clean", "oauth_http"]


@pytest.fixture
def oauth_options() -> OAuthOptions:
    return OAuthOptions(
        throttle=ThrottlePolicy(free_per_username=2, free_per_address=50, base_delay_s=120)
    )


@pytest.mark.parametrize("username", ["alice", "nobody"])
async def test_repeated_failures_are_throttled(
    oauth_http: Any, browser: Browser, alice_account: int, oauth_clean: str, username: str
) -> None:
    client = await register(oauth_http)
    page = await browser.get("/oauth/authorize", client.authorization_params())
    for _ in range(2):
        failed = await browser.submit(page, username=username, password="wrong password")
        assert failed.status_code == 400
    throttled = await browser.submit(page, username=username, password=PASSWORD)
    assert throttled.status_code == 429
    assert throttled.headers["retry-after"] == "120"
    assert "Too many failed sign-ins" in throttled.text
    assert count(oauth_clean, "oauth_sessions") == 0
    # Another username from the same address is not held back by alice's failures.
    if username == "nobody":
        ok = await browser.submit(page, username="alice", password=PASSWORD)
        assert ok.status_code == 200 and "Allow Claude" in ok.text
