"""Fixtures for the console: the real app, real use cases, a signed-in browser.

The write queue runs the use cases in-process with their idempotency keys
(what a worker does); everything else is the production path: the guard,
the tool dispatcher, PostgreSQL with pgvector, the real embedder.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import falcon.testing
import psycopg
import pytest

from api.app import create_app
from api.console.jobs import Jobs
from api.runtime import Runtime
from auth.bearer import BearerValidator
from auth.keys import KeyStore
from auth.passwords import hash_password
from auth.tokens import issue_access_token
from config.settings import Settings
from memory.deps import Deps
from tests.api.conftest import Mcp
from tests.api.test_service_roundtrip import InlineWriteQueue
from tests.conftest import make_user

PUBLIC_URL = "http://127.0.0.1:8000"
PASSWORD = "correct horse battery"
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
_OPERATION = re.compile(r'name="operation" value="([^"]+)"')


@pytest.fixture
def console_settings() -> Settings:
    return Settings(public_url=PUBLIC_URL)


@pytest.fixture
async def console_runtime(
    console_settings: Settings,
    pool: Any,
    embedder: Any,
    clean_db: str,
    run_keyring: Any,
) -> Runtime:
    store = KeyStore(pool, access_token_ttl_s=console_settings.access_token_ttl_s)
    await store.load()
    # A sealed run (tests/conftest.py) seals what the console writes and opens what it reads.
    deps = Deps(settings=console_settings, pool=pool, embedder=embedder, keyring=run_keyring)
    return Runtime(
        settings=console_settings,
        deps=deps,
        write_queue=InlineWriteQueue(deps),
        keystore=store,
        bearer=BearerValidator(store, console_settings),
    )


@pytest.fixture
def console_jobs(pool: Any, clean_db: str) -> Jobs:
    """The console's background jobs: ``await console_jobs.wait_all()`` lets them finish."""
    return Jobs(pool)


@pytest.fixture
async def conductor(
    console_settings: Settings, console_runtime: Runtime, console_jobs: Jobs
) -> AsyncIterator[falcon.testing.ASGIConductor]:
    # The same runtime, not a copy: tests read the audit log create_app gives it.
    console_runtime.console_jobs = console_jobs
    app = create_app(console_settings, runtime=console_runtime)
    async with falcon.testing.ASGIConductor(app) as c:
        yield c
    await console_jobs.close()
    if console_runtime.audit is not None:
        await console_runtime.audit.close()  # its background writer ends with the test


class Browser:
    """A browser's view of the console: its cookies, and forms posted with their token."""

    def __init__(self, conductor: falcon.testing.ASGIConductor, jobs: Jobs | None = None) -> None:
        self.conductor = conductor
        #: The app's background jobs, for tests that wait for one.
        self.jobs = jobs
        self.cookies: dict[str, str] = {}

    def _remember(self, result: falcon.testing.Result) -> None:
        for name, cookie in result.cookies.items():
            if cookie.max_age == 0 or cookie.value == "":
                self.cookies.pop(name, None)
            else:
                self.cookies[name] = cookie.value

    def _cookie_header(self) -> dict[str, str]:
        if not self.cookies:
            return {}
        return {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}

    async def get(self, path: str, **headers: str) -> falcon.testing.Result:
        result = await self.conductor.simulate_get(
            path, headers={**self._cookie_header(), **headers}
        )
        self._remember(result)
        return result

    async def post(
        self,
        path: str,
        fields: dict[str, Any] | list[tuple[str, Any]] | None = None,
        *,
        csrf: bool = True,
        **headers: str,
    ) -> falcon.testing.Result:
        """POST a form; with ``csrf`` the browser's token is added as its page would."""
        pairs = list(fields.items()) if isinstance(fields, dict) else list(fields or [])
        if csrf:
            pairs.append(("csrf_token", self.csrf_token()))
        result = await self.conductor.simulate_post(
            path,
            body=urlencode(pairs, doseq=True).encode(),
            headers={
                **self._cookie_header(),
                "Content-Type": "application/x-www-form-urlencoded",
                **headers,
            },
        )
        self._remember(result)
        return result

    async def post_multipart(
        self, path: str, fields: dict[str, str], files: dict[str, tuple[str, bytes]]
    ) -> falcon.testing.Result:
        boundary = "----ownsona-test-boundary"
        parts: list[bytes] = []
        for name, value in {**fields, "csrf_token": self.csrf_token()}.items():
            parts.append(
                f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                f"{value}\r\n".encode()
            )
        for name, (filename, data) in files.items():
            parts.append(
                f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
                f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode()
                + data
                + b"\r\n"
            )
        body = b"".join(parts) + f"--{boundary}--\r\n".encode()
        result = await self.conductor.simulate_post(
            path,
            body=body,
            headers={
                **self._cookie_header(),
                "Content-Type": f"multipart/form-data; boundary={boundary}",
            },
        )
        self._remember(result)
        return result

    def csrf_token(self) -> str:
        for name, value in self.cookies.items():
            if name.endswith("ownsona_csrf"):
                return value
        raise AssertionError("no CSRF cookie yet: GET a console page first")

    async def sign_in(self, username: str, password: str = PASSWORD) -> None:
        await self.get("/console/sign-in")
        result = await self.post("/console/sign-in", {"username": username, "password": password})
        assert result.status_code == 303, result.text


def operation_key(html: str) -> str:
    """The idempotency key a rendered form carries."""
    match = _OPERATION.search(html)
    assert match, "the form carries no operation key"
    return match.group(1)


def make_account(dsn: str, username: str, password: str = PASSWORD) -> int:
    """An account with a known password (set directly: a password change would end tokens)."""
    user_id = make_user(dsn, username)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE users SET password_hash = %s WHERE id = %s", (hash_password(password), user_id)
        )
    return user_id


@pytest.fixture
def owner(clean_db: str) -> int:
    """The account ``alice`` with a known password."""
    return make_account(clean_db, "alice")


@pytest.fixture
async def browser(
    conductor: falcon.testing.ASGIConductor, owner: int, console_jobs: Jobs
) -> Browser:
    b = Browser(conductor, console_jobs)
    await b.sign_in("alice")
    return b


@pytest.fixture
def owner_mcp(
    conductor: falcon.testing.ASGIConductor,
    console_runtime: Runtime,
    console_settings: Settings,
    owner: int,
) -> Mcp:
    """An assistant of alice's, over /mcp, to see the console's changes as a tool does."""
    token = issue_access_token(
        console_runtime.keystore,
        console_settings,
        user_id=owner,
        client_id="test-assistant",
        scope="memory:read memory:write",
    )
    return Mcp(conductor, token)
