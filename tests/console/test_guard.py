"""The console's guard: sign-in, CSRF, security headers."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import falcon.testing

from api.app import create_app
from api.runtime import Runtime
from auth.bearer import BearerValidator
from auth.keys import KeyStore
from config.settings import Settings
from memory.deps import Deps
from tests.api.test_service_roundtrip import InlineWriteQueue
from tests.console.conftest import Browser


async def test_a_signed_out_visit_goes_to_sign_in_and_back(
    conductor: falcon.testing.ASGIConductor, owner: int
) -> None:
    browser = Browser(conductor)
    first = await browser.get("/console/memories?q=sister")
    assert first.status_code == 303
    location = urlsplit(first.headers["location"])
    assert location.path == "/console/sign-in"
    target = parse_qs(location.query)["next"][0]
    assert target == "/console/memories?q=sister"

    page = await browser.get(first.headers["location"])
    assert page.status_code == 200 and 'name="password"' in page.text
    signed = await browser.post(
        "/console/sign-in",
        {"username": "alice", "password": "correct horse battery", "next": target},
    )
    assert signed.status_code == 303
    assert signed.headers["location"] == "/console/memories?q=sister"


async def test_a_wrong_password_is_refused(
    conductor: falcon.testing.ASGIConductor, owner: int
) -> None:
    browser = Browser(conductor)
    await browser.get("/console/sign-in")
    result = await browser.post("/console/sign-in", {"username": "alice", "password": "nope"})
    assert result.status_code == 401
    assert "Wrong username or password" in result.text
    assert (await browser.get("/console/memories")).status_code == 303


async def test_sign_in_never_sends_the_browser_off_site(
    conductor: falcon.testing.ASGIConductor, owner: int
) -> None:
    browser = Browser(conductor)
    await browser.get("/console/sign-in")
    for target in ("https://evil.example/", "//evil.example/console", "/oauth/authorize"):
        result = await browser.post(
            "/console/sign-in",
            {"username": "alice", "password": "correct horse battery", "next": target},
        )
        assert result.headers["location"] == "/console/memories", target


async def test_a_post_without_the_csrf_token_is_refused(browser: Browser) -> None:
    result = await browser.post("/console/sign-out", csrf=False)
    assert result.status_code == 403
    still = await browser.get("/console/memories")
    assert still.status_code != 303  # still signed in: the sign-out did not happen

    forged = await browser.post("/console/sign-out", {"csrf_token": "forged"}, csrf=False)
    assert forged.status_code == 403


async def test_a_post_from_another_site_is_refused(browser: Browser) -> None:
    result = await browser.post("/console/sign-out", Origin="https://evil.example")
    assert result.status_code == 403
    cross = await browser.post("/console/sign-out", **{"Sec-Fetch-Site": "cross-site"})
    assert cross.status_code == 403


async def test_pages_carry_a_strict_policy(browser: Browser) -> None:
    page = await browser.get("/console/sign-in")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy
    assert "unsafe-inline" not in policy
    assert page.headers["x-frame-options"] == "DENY"
    assert "no-store" in page.headers["cache-control"]


async def test_sign_out_ends_the_session(browser: Browser) -> None:
    result = await browser.post("/console/sign-out")
    assert result.status_code == 303
    assert (await browser.get("/console/memories")).status_code == 303


async def test_static_files_are_served_and_nothing_else(browser: Browser) -> None:
    css = await browser.get("/console/static/console.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    for name in ("..%2Fguard.py", ".hidden.css", "nothing.css", "guard.py"):
        assert (await browser.get(f"/console/static/{name}")).status_code == 404, name


async def test_under_https_the_cookies_are_secure_and_host_only(
    pool: Any, embedder: Any, clean_db: str, owner: int
) -> None:
    settings = Settings(public_url="https://memory.example")
    store = KeyStore(pool, access_token_ttl_s=settings.access_token_ttl_s)
    await store.load()
    deps = Deps(settings=settings, pool=pool, embedder=embedder)
    runtime = Runtime(
        settings, deps, InlineWriteQueue(deps), store, BearerValidator(store, settings)
    )
    app = create_app(settings, runtime=runtime)
    async with falcon.testing.ASGIConductor(app) as conductor:
        browser = Browser(conductor)
        page = await browser.get("/console/sign-in")
        csrf_cookie = page.cookies["__Host-ownsona_csrf"]
        signed = await browser.post(
            "/console/sign-in",
            {"username": "alice", "password": "correct horse battery"},
            Origin="https://memory.example",
        )
        assert signed.status_code == 303
        session_cookie = signed.cookies["__Host-ownsona_session"]
    for cookie in (csrf_cookie, session_cookie):
        assert cookie.secure and cookie.http_only and cookie.path == "/"
        assert cookie.domain is None and cookie.same_site == "Lax"
    assert runtime.audit is not None
    await runtime.audit.close()


async def test_a_signed_out_post_is_refused_before_its_body_is_read(
    conductor: falcon.testing.ASGIConductor, owner: int
) -> None:
    huge = b"x" * (2 * 1024 * 1024)
    result = await conductor.simulate_post(
        "/console/account/import",
        body=huge,
        headers={"Content-Type": "multipart/form-data; boundary=XX"},
    )
    assert result.status_code == 401
    # The sign-in form itself takes only a small form, whatever the console's upload cap.
    signin = await conductor.simulate_post(
        "/console/sign-in",
        body=huge,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert signin.status_code == 413


async def test_only_the_upload_routes_take_large_bodies(browser: Browser) -> None:
    big = [("ids", "1")] * 60_000  # ~400 KB: over the form cap, far under the upload cap
    result = await browser.post("/console/memories", [*big, ("action", "forget")])
    assert result.status_code == 413
    assert "larger than" in result.text


async def test_sign_in_without_the_csrf_token_is_refused(
    conductor: falcon.testing.ASGIConductor, owner: int
) -> None:
    browser = Browser(conductor)
    await browser.get("/console/sign-in")
    fields = {"username": "alice", "password": "correct horse battery"}
    result = await browser.post("/console/sign-in", fields, csrf=False)
    assert result.status_code == 403
    assert (await browser.get("/console/memories")).status_code == 303  # not signed in
