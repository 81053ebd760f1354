"""A token of user A never reaches user B's memories: the real use cases over PostgreSQL."""

from __future__ import annotations

from typing import Any

import falcon.testing
import pytest

from api.app import create_app
from api.runtime import Runtime
from memory.deps import Deps
from tests.api.conftest import Mcp
from tests.api.test_service_roundtrip import InlineWriteQueue
from tests.auth.oauth_flow import (
    Browser,
    alice_account,
    authorize,
    bob_account,
    oauth_clean,
    register,
    token,
)

__all__ = ["alice_account", "bob_account", "oauth_clean"]


@pytest.fixture
async def real_http(
    api_settings: Any, pool: Any, embedder: Any, runtime: Runtime, oauth_clean: str
):
    deps = Deps(settings=api_settings, pool=pool, embedder=embedder)
    real = Runtime(api_settings, deps, InlineWriteQueue(deps), runtime.keystore, runtime.bearer)
    async with falcon.testing.ASGIConductor(create_app(api_settings, runtime=real)) as conductor:
        yield conductor


async def _connect(conductor: Any, username: str, password: str) -> Mcp:
    client = await register(conductor)
    code = await authorize(Browser(conductor), client, username=username, password=password)
    body = (await token(conductor, client.token_form(code))).json
    return Mcp(conductor, body["access_token"])


async def test_alice_token_never_reaches_bob_memories(
    real_http: Any, alice_account: int, bob_account: int
) -> None:
    from tests.auth.oauth_flow import PASSWORD

    alice = await _connect(real_http, "alice", PASSWORD)
    bob = await _connect(real_http, "bob", "bob's own long password")
    stored = await bob.call_tool("remember", {"text": "Bob's locker code is behind the blue door."})
    assert stored["isError"] is False, stored
    bob_id = stored["structuredContent"]["memory_id"]
    await alice.call_tool("remember", {"text": "Alice drinks green tea every morning."})

    found = await alice.call_tool("recall", {"query": "locker code blue door"})
    assert all(m["id"] != bob_id for m in found["structuredContent"]["matches"])
    listed = await alice.call_tool("list_memories", {})
    texts = [m["text"] for m in listed["structuredContent"]["memories"]]
    assert texts == ["Alice drinks green tea every morning."]
    direct = await alice.call_tool("get_memory", {"id": bob_id})
    assert direct["isError"] is True and direct["structuredContent"]["error"]["code"] == "NOT_FOUND"
    forget = await alice.call_tool("forget", {"id": bob_id, "reason": "mine now"})
    assert forget["isError"] is True
    still = await bob.call_tool("get_memory", {"id": bob_id})
    assert still["isError"] is False
