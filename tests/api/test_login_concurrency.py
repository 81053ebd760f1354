"""Concurrent wrong passwords over HTTP: at most the free number are checked, in one app or two.

The count of checked attempts is observed from outside: a checked wrong
password answers the form again (400) and logs "sign-in failed"; a refused
one answers 429 before argon2 runs, and without waiting for the username's
lock. The last test runs the second web
process as a real process over its own pool.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import sys
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest

from api.app import create_app
from api.oauth import OAuthOptions
from api.runtime import Runtime
from auth.bearer import BearerValidator
from auth.keys import KeyStore
from auth.throttle import ThrottlePolicy
from memory.deps import Deps
from storage import login_attempts
from storage.pool import make_pool
from tests.api.conftest import PUBLIC_URL
from tests.auth.oauth_flow import (
    CLAUDE_CALLBACK,
    PASSWORD,
    alice_account,
    oauth_clean,
    parse_form,
    rows,
)

__all__ = ["alice_account", "oauth_clean"]

FREE = 4
DELAY_S = 120
ATTEMPTS = 30
ADDRESS = "203.0.113.7"
START = datetime(2030, 1, 1, tzinfo=UTC)


class Clock:
    # In the future, so the database's own pruning (by now()) never forgets a test's failures.
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def oauth_options(clock: Clock) -> OAuthOptions:
    # The address allowance is far above the burst: only the username's count is at stake.
    policy = ThrottlePolicy(
        free_per_username=FREE,
        free_per_address=10 * ATTEMPTS,
        base_delay_s=DELAY_S,
        max_delay_s=10 * DELAY_S,
    )
    return OAuthOptions(throttle=policy, clock=clock)


class Browser:
    """One user agent (cookies, one signed-in form) over httpx against the ASGI app."""

    def __init__(self, app: Any) -> None:
        transport = httpx.ASGITransport(app=app, client=(ADDRESS, 40000))
        self.http = httpx.AsyncClient(transport=transport, base_url=PUBLIC_URL)
        self.form: dict[str, Any] = {}

    async def open_login(self) -> None:
        registered = await self.http.post(
            "/oauth/register", json={"redirect_uris": [CLAUDE_CALLBACK], "client_name": "Claude"}
        )
        assert registered.status_code == 201, registered.text
        params = {
            "response_type": "code",
            "client_id": registered.json()["client_id"],
            "redirect_uri": CLAUDE_CALLBACK,
            "state": "s",
            "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
            "code_challenge_method": "S256",
            "scope": "memory:read memory:write",
            "resource": f"{PUBLIC_URL}/mcp",
        }
        page = await self.http.get("/oauth/authorize", params=params)
        assert page.status_code == 200 and 'name="password"' in page.text, page.text[:2000]
        self.form = parse_form(page.text)

    async def sign_in(self, username: str, password: str) -> httpx.Response:
        values = {"username": username, "password": password, "action": "login"}
        fields = [(k, v) for k, v in self.form["fields"] if k not in values]
        fields.extend(values.items())
        return await self.http.post(self.form["action"], data=dict(fields))


@pytest.fixture
async def app(
    api_settings: Any,
    runtime: Runtime,
    use_cases: Any,
    oauth_options: OAuthOptions,
    oauth_clean: str,
) -> Any:
    return create_app(
        api_settings,
        runtime=dataclasses.replace(runtime, run_inline=use_cases, oauth_options=oauth_options),
    )


@pytest.fixture
async def second_app(
    api_settings: Any, dsn: str, runtime: Runtime, use_cases: Any, oauth_options: OAuthOptions
) -> AsyncIterator[Any]:
    """Another web process's app: its own pool, key store and runtime, the same database."""
    pool = make_pool(dsn, min_size=1, max_size=8, name="second web process")
    await pool.open(wait=True)
    try:
        keystore = KeyStore(pool, access_token_ttl_s=api_settings.access_token_ttl_s)
        await keystore.load()
        other = Runtime(
            settings=api_settings,
            deps=Deps(settings=api_settings, pool=pool, embedder=None),  # type: ignore[arg-type]
            write_queue=runtime.write_queue,
            keystore=keystore,
            bearer=BearerValidator(keystore, api_settings),
        )
        yield create_app(
            api_settings,
            runtime=dataclasses.replace(other, run_inline=use_cases, oauth_options=oauth_options),
        )
    finally:
        await pool.close()


async def _browser(app: Any) -> AsyncIterator[Browser]:
    browser = Browser(app)
    async with browser.http:
        await browser.open_login()
        yield browser


@pytest.fixture
async def browser(app: Any) -> AsyncIterator[Browser]:
    async for b in _browser(app):
        yield b


@pytest.fixture
async def second_browser(second_app: Any) -> AsyncIterator[Browser]:
    async for b in _browser(second_app):
        yield b


def _checked(caplog: pytest.LogCaptureFixture) -> int:
    return sum("sign-in failed" in r.getMessage() for r in caplog.records)


def _failures(dsn: str, username: str) -> int:
    return int(
        rows(dsn, "SELECT count(*) FROM oauth_login_failures WHERE username = %s", username)[0][0]
    )


async def _burst(browsers: list[Browser], username: str) -> Counter[int]:
    answers = await asyncio.gather(
        *(
            browsers[n % len(browsers)].sign_in(username, f"wrong password {n}")
            for n in range(ATTEMPTS)
        )
    )
    for answer in answers:
        if answer.status_code == 429:
            assert answer.headers["retry-after"] == str(DELAY_S)
            assert "Too many failed sign-ins" in answer.text
        else:
            assert answer.status_code == 400 and "Incorrect username or password" in answer.text
    return Counter(a.status_code for a in answers)


@pytest.mark.parametrize("username", ["alice", "nobody"])
async def test_concurrent_wrong_passwords_check_at_most_the_free_number(
    browser: Browser,
    alice_account: int,
    oauth_clean: str,
    username: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ownsona.auth.login")
    answers = await _burst([browser], username)
    assert answers == {400: FREE, 429: ATTEMPTS - FREE}
    assert _checked(caplog) == FREE
    assert _failures(oauth_clean, username) == FREE


async def test_two_web_processes_share_the_count(
    browser: Browser,
    second_browser: Browser,
    alice_account: int,
    oauth_clean: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ownsona.auth.login")
    answers = await _burst([browser, second_browser], "alice")
    assert answers == {400: FREE, 429: ATTEMPTS - FREE}
    assert _checked(caplog) == FREE
    # The other process refuses too, even the right password, before checking it.
    refused = await second_browser.sign_in("alice", PASSWORD)
    assert refused.status_code == 429 and refused.headers["retry-after"] == str(DELAY_S)


async def test_right_password_waits_for_the_delay_then_clears_the_failures(
    browser: Browser,
    alice_account: int,
    oauth_clean: str,
    clock: Clock,
) -> None:
    answers = await _burst([browser], "alice")
    assert answers[400] == FREE
    refused = await browser.sign_in("alice", PASSWORD)
    assert refused.status_code == 429 and refused.headers["retry-after"] == str(DELAY_S)
    clock.now += timedelta(seconds=DELAY_S - 1)
    refused = await browser.sign_in("alice", PASSWORD)
    assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
    assert rows(oauth_clean, "SELECT count(*) FROM oauth_sessions")[0][0] == 0

    clock.now += timedelta(seconds=1)
    signed_in = await browser.sign_in("alice", PASSWORD)
    assert signed_in.status_code == 200 and "Allow Claude" in signed_in.text
    assert _failures(oauth_clean, "alice") == 0
    # Cleared: a new wrong password is checked again, not refused.
    again = await browser.sign_in("alice", "wrong password")
    assert again.status_code == 400
    assert _failures(oauth_clean, "alice") == 1


async def test_a_throttled_username_refuses_a_burst_without_queueing_on_its_lock(
    browser: Browser,
    alice_account: int,
    oauth_clean: str,
) -> None:
    first = await _burst([browser], "alice")
    assert first[400] == FREE
    # Another connection holds alice's throttle lock: a burst that queued on it,
    # each attempt holding a pool connection, would not answer until released.
    async with (
        await psycopg.AsyncConnection.connect(oauth_clean, autocommit=True) as conn,
        conn.transaction(),
    ):
        await login_attempts.lock(conn, "alice", ADDRESS)
        second = await asyncio.wait_for(_burst([browser], "alice"), timeout=20)
    assert second == {429: ATTEMPTS}
    assert _failures(oauth_clean, "alice") == FREE


# Another web process: the same guard and policy over its own pool, started
# and released on a line from stdin so that both bursts run at once.
_OTHER_PROCESS = f"""
import asyncio, json, sys
from auth.throttle import LoginGuard, ThrottlePolicy
from storage.pool import make_pool

async def main():
    pool = make_pool(sys.argv[1], min_size=1, max_size=8, name="other web process")
    await pool.open(wait=True)
    policy = ThrottlePolicy(free_per_username={FREE}, free_per_address={10 * ATTEMPTS},
                            base_delay_s={DELAY_S}, max_delay_s={10 * DELAY_S})
    guard = LoginGuard(pool, policy, lambda: START)
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    outcomes = await asyncio.gather(*(
        guard.sign_in("alice", f"wrong password {{n}}", "198.51.100.9")
        for n in range({ATTEMPTS // 2})
    ))
    print(json.dumps([o.retry_after_s for o in outcomes]), flush=True)
    await pool.close()

from datetime import datetime
START = datetime.fromisoformat({START.isoformat()!r})
asyncio.run(main())
"""


async def test_a_separate_web_process_shares_the_count(
    browser: Browser,
    alice_account: int,
    oauth_clean: str,
) -> None:
    other = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _OTHER_PROCESS,
        oauth_clean,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=dict(os.environ),
    )
    assert other.stdin is not None and other.stdout is not None
    try:
        ready = await asyncio.wait_for(other.stdout.readline(), timeout=60)
        assert ready == b"ready\n", ready
        other.stdin.write(b"go\n")
        await other.stdin.drain()
        here, there = await asyncio.gather(
            asyncio.gather(
                *(browser.sign_in("alice", f"wrong password {n}") for n in range(ATTEMPTS // 2))
            ),
            asyncio.wait_for(other.stdout.readline(), timeout=60),
        )
        assert await asyncio.wait_for(other.wait(), timeout=60) == 0
    finally:
        if other.returncode is None:
            other.kill()
            await other.wait()
    checked_there = sum(1 for wait in json.loads(there) if wait is None)
    statuses = Counter(r.status_code for r in here)
    assert statuses[400] + checked_there == FREE
    assert statuses[400] + statuses[429] == ATTEMPTS // 2
    assert _failures(oauth_clean, "alice") == FREE
