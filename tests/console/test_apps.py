"""/console/apps: the owner's connected apps, and disconnecting one."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

import falcon.testing
import psycopg

from api.runtime import Runtime
from auth.cli_tokens import mint_cli_token
from config.settings import Settings
from tests.api.conftest import Mcp
from tests.auth.oauth_flow import Client, parse_form, query_of, register, token
from tests.console.conftest import PASSWORD, Browser, make_account

RESOURCE = "http://127.0.0.1:8000/mcp"


async def connect(conductor: falcon.testing.ASGIConductor, browser: Browser) -> dict[str, Any]:
    """Connect a registered app "Claude" as the signed-in user: its token response."""
    client: Client = await register(conductor)
    params = client.authorization_params(resource=RESOURCE)
    page = await browser.get("/oauth/authorize?" + urlencode(params))
    assert page.status_code == 200 and "Allow" in page.text, page.text[:2000]
    assert 'href="/console/apps">Apps page</a>' in page.text  # where to disconnect it later
    form = parse_form(page.text)
    answer = await browser.post(
        form["action"], [*form["fields"], ("decision", "allow")], csrf=False
    )
    assert answer.status_code in (302, 303), answer.text[:2000]
    code = query_of(answer.headers["location"])["code"]
    issued = await token(conductor, client.token_form(code, resource=RESOURCE))
    assert issued.status_code == 200, issued.text
    return {"client_id": client.client_id, **issued.json}


async def refresh(conductor: falcon.testing.ASGIConductor, app: dict[str, Any]) -> int:
    result = await token(
        conductor,
        [
            ("grant_type", "refresh_token"),
            ("refresh_token", app["refresh_token"]),
            ("client_id", app["client_id"]),
        ],
    )
    return result.status_code


def disconnect_action(html: str, kind: str) -> str:
    match = re.search(rf'action="(/console/apps/{kind}/\d+/disconnect)"', html)
    assert match, f"no {kind} disconnect form"
    return match.group(1)


async def mint(pool: Any, settings: Settings, username: str, label: str) -> str:
    return await mint_cli_token(
        pool, settings, username=username, scope="memory:read memory:write", ttl_s=None, label=label
    )


async def test_the_page_lists_an_assistant_and_a_cli_token_with_what_they_wrote(
    conductor: falcon.testing.ASGIConductor,
    browser: Browser,
    pool: Any,
    console_settings: Settings,
) -> None:
    app = await connect(conductor, browser)
    assistant = Mcp(conductor, app["access_token"])
    first = await assistant.call_tool("remember", {"text": "I play the cello on Sundays."})
    assert not first["isError"], first
    await assistant.call_tool("remember", {"text": "My dentist is in Leith."})
    cli = Mcp(conductor, await mint(pool, console_settings, "alice", "laptop backups"))
    await cli.call_tool("count_memories", {})

    page = await browser.get("/console/apps")
    assert page.status_code == 200
    html = page.text
    assert "Claude" in html and "registered (dynamic registration)" in html
    assert app["client_id"] in html
    assert "memory:read" in html and "memory:write" in html
    claude = html[html.index("Claude") : html.index("CLI tokens")]
    assert re.search(r"Memories written</dt>\s*<dd>2</dd>", claude), claude
    tokens = html[html.index("CLI tokens") :]
    assert "laptop backups" in tokens
    assert re.search(r"Calls on record</dt>\s*<dd>1</dd>", tokens)
    assert re.search(r"Memories written</dt>\s*<dd>0</dd>", tokens)
    assert not re.search(r"Last use</dt>\s*<dd>—", tokens)  # the audit log's last call shows


async def test_disconnecting_an_assistant_refuses_its_next_call_and_its_refresh(
    conductor: falcon.testing.ASGIConductor, browser: Browser, console_runtime: Runtime
) -> None:
    app = await connect(conductor, browser)
    assistant = Mcp(conductor, app["access_token"])
    assert (await assistant.request("tools/list")).status_code == 200

    page = await browser.get("/console/apps")
    done = await browser.post(disconnect_action(page.text, "grants"))
    assert done.status_code == 303
    assert "notice=app-disconnected" in done.headers["location"]

    assert (await assistant.request("tools/list")).status_code == 401
    assert await refresh(conductor, app) == 400
    after = await browser.get("/console/apps")
    assert "No assistant is connected." in after.text
    assert "its next request will be refused" in (await browser.get(done.headers["location"])).text


async def test_disconnecting_a_cli_token_refuses_its_next_call(
    conductor: falcon.testing.ASGIConductor,
    browser: Browser,
    pool: Any,
    console_settings: Settings,
) -> None:
    cli = Mcp(conductor, await mint(pool, console_settings, "alice", "cron job"))
    assert (await cli.request("tools/list")).status_code == 200
    page = await browser.get("/console/apps")
    done = await browser.post(disconnect_action(page.text, "tokens"))
    assert done.status_code == 303
    assert (await cli.request("tools/list")).status_code == 401
    assert "cron job" not in (await browser.get("/console/apps")).text


async def test_another_accounts_app_is_not_found_and_stays_connected(
    conductor: falcon.testing.ASGIConductor,
    browser: Browser,
    pool: Any,
    console_settings: Settings,
    clean_db: str,
) -> None:
    make_account(clean_db, "bob")
    bob = Browser(conductor)
    await bob.sign_in("bob", PASSWORD)
    bobs_app = await connect(conductor, bob)
    bobs_cli = Mcp(conductor, await mint(pool, console_settings, "bob", "bob's"))
    bob_page = (await bob.get("/console/apps")).text
    grant_path = disconnect_action(bob_page, "grants")
    token_path = disconnect_action(bob_page, "tokens")

    alice_page = (await browser.get("/console/apps")).text
    assert "bob&#39;s" not in alice_page and bobs_app["client_id"] not in alice_page
    for path in (grant_path, token_path, "/console/apps/grants/999999/disconnect"):
        refused = await browser.post(path)
        assert refused.status_code == 404, path
        assert "No such" in refused.text

    assert (await Mcp(conductor, bobs_app["access_token"]).request("tools/list")).status_code == 200
    assert (await bobs_cli.request("tools/list")).status_code == 200
    assert await refresh(conductor, bobs_app) == 200
    with psycopg.connect(clean_db) as conn:
        row = conn.execute("SELECT count(*) FROM oauth_grants WHERE revoked_at IS NOT NULL")
        assert row.fetchone() == (0,)


async def test_disconnect_without_the_csrf_token_is_refused(
    conductor: falcon.testing.ASGIConductor, browser: Browser
) -> None:
    app = await connect(conductor, browser)
    page = await browser.get("/console/apps")
    refused = await browser.post(disconnect_action(page.text, "grants"), csrf=False)
    assert refused.status_code == 403
    assert (await Mcp(conductor, app["access_token"]).request("tools/list")).status_code == 200
    assert await refresh(conductor, app) == 200
