"""Helpers for driving the OAuth endpoints the way a client and a browser do.

Shared by ``tests/auth`` and ``tests/api/test_oauth_*.py``. Works with
``falcon.testing.ASGIConductor`` (in-process) through a tiny adapter, so
the same steps serve the in-process tests; the end-to-end tests drive a
real server with httpx instead.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import secrets
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import falcon.testing
import psycopg
import pytest

#: The OAuth tables that TRUNCATE users CASCADE does not reach.
_EXTRA_TABLES = "oauth_login_failures, oauth_revoked_tokens, oauth_clients"

PASSWORD = "correct horse battery staple"
CLAUDE_CALLBACK = "https://claude.ai/api/mcp/auth_callback"


@pytest.fixture
def oauth_clean(clean_db: str) -> str:
    """clean_db plus the OAuth tables that do not hang off users."""
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {_EXTRA_TABLES} RESTART IDENTITY CASCADE")
    return clean_db


def pkce_pair() -> tuple[str, str]:
    """(verifier, S256 challenge)."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


class _FormParser(HTMLParser):
    """Collects the forms of a page: their inputs and submit buttons."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append({"action": a.get("action", ""), "fields": [], "buttons": []})
        elif tag == "input" and self.forms and "name" in a:
            if a.get("type") in ("hidden", "text", "password", None, ""):
                self.forms[-1]["fields"].append((a["name"], a.get("value", "")))
        elif tag == "button" and self.forms and "name" in a:
            self.forms[-1]["buttons"].append((a["name"], a.get("value", "")))


def parse_form(html: str) -> dict[str, Any]:
    parser = _FormParser()
    parser.feed(html)
    assert parser.forms, f"no form on the page:\n{html[:2000]}"
    return parser.forms[0]


def query_of(location: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query, keep_blank_values=True).items()}


@dataclass
class Browser:
    """A cookie-keeping user agent over a falcon.testing conductor."""

    conductor: falcon.testing.ASGIConductor
    cookies: dict[str, str] = field(default_factory=dict)
    remote_addr: str = "203.0.113.7"

    def _keep(self, result: falcon.testing.Result) -> None:
        for name, cookie in result.cookies.items():
            self.cookies[name] = cookie.value

    async def get(
        self, path: str, params: dict[str, str] | list[tuple[str, str]]
    ) -> falcon.testing.Result:
        result = await self.conductor.simulate_get(
            path,
            query_string=urlencode(params),
            cookies=self.cookies,
            remote_addr=self.remote_addr,
        )
        self._keep(result)
        return result

    async def post_form(
        self, path: str, fields: list[tuple[str, str]], headers: dict[str, str] | None = None
    ) -> falcon.testing.Result:
        result = await self.conductor.simulate_post(
            path,
            body=urlencode(fields),
            headers={"Content-Type": "application/x-www-form-urlencoded", **(headers or {})},
            cookies=self.cookies,
            remote_addr=self.remote_addr,
        )
        self._keep(result)
        return result

    async def submit(
        self, page: falcon.testing.Result, *, drop: tuple[str, ...] = (), **values: str
    ) -> falcon.testing.Result:
        """Fill the page's form (``values`` replace fields or pick a button) and post it."""
        form = parse_form(page.text)
        fields = [(k, v) for k, v in form["fields"] if k not in drop and k not in values]
        fields.extend(values.items())
        return await self.post_form(form["action"], fields)


@dataclass
class Client:
    """A registered OAuth client and what it keeps for one authorization."""

    info: dict[str, Any]
    redirect_uri: str
    verifier: str = ""
    challenge: str = ""
    state: str = ""

    @property
    def client_id(self) -> str:
        return str(self.info["client_id"])

    def authorization_params(self, **overrides: str | None) -> dict[str, str]:
        self.verifier, self.challenge = pkce_pair()
        self.state = secrets.token_urlsafe(12)
        params: dict[str, str | None] = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": self.redirect_uri,
            "state": self.state,
            "code_challenge": self.challenge,
            "code_challenge_method": "S256",
            "scope": "memory:read memory:write",
            "resource": "https://mem.example/mcp",
        }
        params.update(overrides)
        return {k: v for k, v in params.items() if v is not None}

    def token_form(self, code: str, **overrides: str | None) -> list[tuple[str, str]]:
        form: dict[str, str | None] = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.redirect_uri,
            "client_id": self.client_id,
            "code_verifier": self.verifier,
            "resource": "https://mem.example/mcp",
        }
        form.update(overrides)
        return [(k, v) for k, v in form.items() if v is not None]


async def register(
    conductor: falcon.testing.ASGIConductor,
    redirect_uri: str = CLAUDE_CALLBACK,
    **metadata: Any,
) -> Client:
    body = {"redirect_uris": [redirect_uri], "client_name": "Claude", **metadata}
    result = await conductor.simulate_post("/oauth/register", json=body)
    assert result.status_code == 201, result.text
    return Client(result.json, redirect_uri)


async def authorize(
    browser: Browser,
    client: Client,
    username: str = "alice",
    password: str = PASSWORD,
    **overrides: str | None,
) -> str:
    """Sign in and allow; the code from the redirect (checks state and iss on the way)."""
    page = await browser.get("/oauth/authorize", client.authorization_params(**overrides))
    if page.status_code == 200 and 'name="password"' in page.text:
        page = await browser.submit(page, username=username, password=password)
    if page.status_code == 200:
        assert "Allow" in page.text, page.text
        page = await browser.submit(page, decision="allow")
    assert page.status_code in (302, 303), (page.status_code, page.text[:2000])
    location = page.headers["location"]
    assert location.startswith(client.redirect_uri), location
    query = query_of(location)
    assert query["state"] == client.state
    assert query["iss"] == "https://mem.example"
    return query["code"]


async def token(
    conductor: falcon.testing.ASGIConductor, form: list[tuple[str, str]], **headers: str
) -> falcon.testing.Result:
    return await conductor.simulate_post(
        "/oauth/token",
        body=urlencode(form),
        headers={"Content-Type": "application/x-www-form-urlencoded", **headers},
    )


def rows(dsn: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()  # type: ignore[arg-type]


def count(dsn: str, table: str) -> int:
    return int(rows(dsn, f"SELECT count(*) FROM {table}")[0][0])


# -- fixtures for the HTTP-level tests (tests/api/test_oauth_*.py import them) ----------


@pytest.fixture
async def alice_account(pool: Any, oauth_clean: str) -> int:
    from auth.accounts import add_user

    return await add_user(pool, "alice", PASSWORD)


@pytest.fixture
async def bob_account(pool: Any, oauth_clean: str) -> int:
    from auth.accounts import add_user

    return await add_user(pool, "bob", "bob's own long password")


@pytest.fixture
def oauth_options() -> Any:
    from api.oauth import OAuthOptions

    return OAuthOptions()


@pytest.fixture
async def oauth_http(
    api_settings: Any, runtime: Any, use_cases: Any, oauth_options: Any, oauth_clean: str
) -> Any:
    """A conductor over the app with the real OAuth server and fake tool work."""
    from api.app import create_app

    app = create_app(
        api_settings,
        runtime=dataclasses.replace(runtime, run_inline=use_cases, oauth_options=oauth_options),
    )
    async with falcon.testing.ASGIConductor(app) as conductor:
        yield conductor


@pytest.fixture
def browser(oauth_http: falcon.testing.ASGIConductor) -> Browser:
    return Browser(oauth_http)
