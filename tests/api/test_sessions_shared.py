"""Ended MCP sessions are refused by every web process, before and after a restart.

A "web process" here is an app of its own: its own pool, key store, runtime
and session book over the same database, as ``WEB_CONCURRENCY=2`` runs two
(tests/api/test_login_concurrency.py does the same for sign-in throttling).
A restart is such an app created after the DELETE.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator
from typing import Any

import falcon.testing
import psycopg
import pytest

from api.app import create_app
from api.runtime import Runtime
from auth.bearer import BearerValidator
from auth.keys import KeyStore
from auth.mcp_sessions import SESSION_LIFETIME_S, SessionBook
from config.settings import Settings
from memory.deps import Deps
from storage.pool import make_pool
from tests.api.conftest import FakeUseCases, Mcp, open_session
from tests.auth.oauth_flow import rows

RECALL = {"name": "recall", "arguments": {"query": "x"}}


@contextlib.asynccontextmanager
async def web_process(
    dsn: str, settings: Settings, runtime: Runtime, use_cases: FakeUseCases, token: str
) -> AsyncIterator[Mcp]:
    """Another web process on the same database, started now."""
    pool = make_pool(dsn, min_size=1, max_size=4, name="another web process")
    await pool.open(wait=True)
    try:
        keystore = KeyStore(pool, access_token_ttl_s=settings.access_token_ttl_s)
        await keystore.load()
        other = Runtime(
            settings=settings,
            deps=Deps(settings=settings, pool=pool, embedder=None),
            write_queue=runtime.write_queue,
            keystore=keystore,
            bearer=BearerValidator(keystore, settings),
        )
        app = create_app(settings, runtime=dataclasses.replace(other, run_inline=use_cases))
        async with falcon.testing.ASGIConductor(app) as conductor:
            yield Mcp(conductor, token)
    finally:
        await pool.close()


@pytest.fixture
async def other(
    dsn: str, api_settings: Settings, runtime: Runtime, use_cases: FakeUseCases, token: str
) -> AsyncIterator[Mcp]:
    async with web_process(dsn, api_settings, runtime, use_cases, token) as mcp:
        yield mcp


async def _delete(mcp: Mcp, session: str) -> int:
    ended = await mcp.conductor.simulate_delete("/mcp", headers=mcp.headers(mcp_session_id=session))
    return ended.status_code


async def test_a_session_ended_on_one_process_is_404_on_the_other(mcp: Mcp, other: Mcp) -> None:
    session = await open_session(mcp)
    assert (await other.request("ping", mcp_session_id=session)).status_code == 200
    assert await _delete(mcp, session) == 204
    refused = await other.request("ping", id=7, mcp_session_id=session)
    assert refused.status_code == 404
    assert refused.json["id"] == 7 and refused.json["error"]["code"] == -32001
    assert (await other.request("tools/call", RECALL, mcp_session_id=session)).status_code == 404
    assert await _delete(other, session) == 404
    # The client starts over, on either process.
    fresh = await open_session(other)
    assert (await mcp.request("ping", mcp_session_id=fresh)).status_code == 200


async def test_a_restarted_server_still_refuses_an_ended_session(
    mcp: Mcp,
    dsn: str,
    api_settings: Settings,
    runtime: Runtime,
    use_cases: FakeUseCases,
    token: str,
) -> None:
    ended = await open_session(mcp)
    kept = await open_session(mcp)
    assert await _delete(mcp, ended) == 204
    async with web_process(dsn, api_settings, runtime, use_cases, token) as restarted:
        assert (await restarted.request("ping", mcp_session_id=ended)).status_code == 404
        assert (await restarted.request("ping", mcp_session_id=kept)).status_code == 200
        assert await _delete(restarted, ended) == 404


async def test_two_processes_ending_one_session_at_once_end_it_once(
    mcp: Mcp, other: Mcp, clean_db: str, user_id: int
) -> None:
    session = await open_session(mcp)
    statuses = await asyncio.gather(_delete(mcp, session), _delete(other, session))
    assert sorted(statuses) == [204, 404]
    assert rows(clean_db, "SELECT session_key, user_id FROM mcp_ended_sessions") == [
        (session, user_id)
    ]


async def test_an_id_older_than_the_session_lifetime_is_404(
    mcp: Mcp, keystore: KeyStore, user_id: int
) -> None:
    now = time.time()
    young = SessionBook(clock=lambda: now - SESSION_LIFETIME_S + 60).open(keystore, user_id)
    old = SessionBook(clock=lambda: now - SESSION_LIFETIME_S - 60).open(keystore, user_id)
    assert (await mcp.request("ping", mcp_session_id=young)).status_code == 200
    assert (await mcp.request("ping", mcp_session_id=old)).status_code == 404
    assert await _delete(mcp, old) == 404
    # The issue time is signed: moving it forward does not make an old id young.
    kid, _issued, nonce, mac = old.split(".")
    moved = f"{kid}.{int(now)}.{nonce}.{mac}"
    assert (await mcp.request("ping", mcp_session_id=moved)).status_code == 404


async def test_ending_a_session_prunes_entries_past_the_lifetime(
    mcp: Mcp, clean_db: str, user_id: int
) -> None:
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO mcp_ended_sessions (session_key, user_id, ended_at) VALUES"
            " ('stale', %(u)s, now() - make_interval(secs => %(old)s)),"
            " ('recent', %(u)s, now() - make_interval(secs => %(young)s))",
            {
                "u": user_id,
                "old": SESSION_LIFETIME_S + 2 * 86_400,
                "young": SESSION_LIFETIME_S - 60,
            },
        )
    session = await open_session(mcp)
    assert await _delete(mcp, session) == 204
    kept = rows(clean_db, "SELECT session_key FROM mcp_ended_sessions ORDER BY session_key")
    assert kept == sorted([("recent",), (session,)])


@pytest.fixture
def ended_sessions_unreadable(clean_db: str) -> Any:
    """The session lookup fails in PostgreSQL (its table is gone) while the bearer check works."""
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("ALTER TABLE mcp_ended_sessions RENAME TO mcp_ended_sessions_away")
    try:
        yield
    finally:
        with psycopg.connect(clean_db, autocommit=True) as conn:
            conn.execute("ALTER TABLE mcp_ended_sessions_away RENAME TO mcp_ended_sessions")


async def test_a_database_failure_in_the_session_check_is_answered_like_the_bearer_checks(
    mcp: Mcp, use_cases: FakeUseCases, request: pytest.FixtureRequest
) -> None:
    session = await open_session(mcp)
    request.getfixturevalue("ended_sessions_unreadable")
    called = await mcp.request("tools/call", RECALL, id=5, mcp_session_id=session)
    assert called.status_code == 200 and called.json["id"] == 5
    tool = called.json["result"]
    assert tool["isError"] is True
    assert tool["structuredContent"]["error"]["code"] == "DATABASE_ERROR"
    assert use_cases.calls == []
    pinged = await mcp.request("ping", mcp_session_id=session)
    assert pinged.status_code == 503 and pinged.headers["retry-after"]
    assert await _delete(mcp, session) == 503
    # Without a session id nothing is looked up: served as before.
    assert (await mcp.request("ping")).status_code == 200
