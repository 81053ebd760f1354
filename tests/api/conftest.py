"""Fixtures for the HTTP/MCP edge: a real key store and bearer check, fake tool work.

The bearer validator and key store are the real ones (PostgreSQL-backed);
what the tools do is replaced by :class:`FakeUseCases` and
:class:`FakeWriteQueue`, which record their calls, so these tests are about
the transport. ``test_service_roundtrip.py`` runs the real use cases.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import falcon.testing
import pytest

from api.app import create_app
from api.runtime import Runtime
from auth.bearer import BearerValidator
from auth.keys import KeyStore
from auth.tokens import issue_access_token
from config.settings import Settings
from memory.calls import CallMeta
from memory.commands import Command
from memory.deps import Deps
from tests.conftest import make_user
from tests.tool_calls import TOOL_OF

PUBLIC_URL = "https://mem.example"


@pytest.fixture
def api_settings() -> Settings:
    # A non-loopback public URL, so origin checks can tell "ours" from "loopback".
    return Settings(public_url=PUBLIC_URL, max_body_bytes=4096, max_batch_size=5)


@pytest.fixture
def user_id(clean_db: str) -> int:
    return make_user(clean_db, "alice")


@pytest.fixture
async def keystore(pool: Any, clean_db: str, api_settings: Settings) -> KeyStore:
    store = KeyStore(pool, access_token_ttl_s=api_settings.access_token_ttl_s)
    await store.load()
    return store


@pytest.fixture
def token(keystore: KeyStore, api_settings: Settings, user_id: int) -> str:
    return issue_access_token(
        keystore,
        api_settings,
        user_id=user_id,
        client_id="test-client",
        scope="memory:read memory:write",
    )


#: The tool a queued command came from (queued tools have a command class of their own).
_TOOL_OF = TOOL_OF


@dataclass
class FakeWriteQueue:
    """Records submissions; answers with ``payload`` or raises ``error``."""

    payload: dict[str, Any] = field(
        default_factory=lambda: {"ok": True, "memory_id": 1, "message": "Ok"}
    )
    error: Exception | None = None
    #: (the tool, the user, the command's JSON as the message carries it, the key).
    calls: list[tuple[str, int, dict[str, Any], str]] = field(default_factory=list)
    metas: list[CallMeta] = field(default_factory=list)

    async def submit(self, meta: CallMeta, command: Command) -> dict[str, Any]:
        key = meta.idempotency_key.key if meta.idempotency_key is not None else ""
        self.calls.append((_TOOL_OF[type(command)], meta.user_id, command.to_json(), key))
        self.metas.append(meta)
        if self.error is not None:
            raise self.error
        return self.payload


@dataclass
class FakeUseCases:
    """The inline runner's stand-in: every inline command answers ``payload`` (or raises
    ``error``); records (command type name, user id, command)."""

    payload: dict[str, Any] = field(default_factory=lambda: {"ok": True, "matches": []})
    error: Exception | None = None
    calls: list[tuple[str, int, Command]] = field(default_factory=list)

    async def __call__(self, deps: Deps, meta: CallMeta, command: Command) -> dict[str, Any]:
        self.calls.append((type(command).__name__, meta.user_id, command))
        if self.error is not None:
            raise self.error
        return self.payload


@pytest.fixture
def write_queue() -> FakeWriteQueue:
    return FakeWriteQueue()


@pytest.fixture
def use_cases() -> FakeUseCases:
    return FakeUseCases()


@pytest.fixture
def runtime(
    api_settings: Settings, pool: Any, keystore: KeyStore, write_queue: FakeWriteQueue
) -> Runtime:
    deps = Deps(settings=api_settings, pool=pool, embedder=None)
    return Runtime(
        settings=api_settings,
        deps=deps,
        write_queue=write_queue,
        keystore=keystore,
        bearer=BearerValidator(keystore, api_settings),
    )


@pytest.fixture
async def client(
    api_settings: Settings, runtime: Runtime, use_cases: FakeUseCases
) -> AsyncIterator[falcon.testing.ASGIConductor]:
    app = create_app(api_settings, runtime=dataclasses.replace(runtime, run_inline=use_cases))
    async with falcon.testing.ASGIConductor(app) as conductor:
        yield conductor


class Mcp:
    """Posts JSON-RPC to /mcp the way an MCP client does."""

    def __init__(self, conductor: falcon.testing.ASGIConductor, token: str) -> None:
        self.conductor = conductor
        self.token = token

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        headers.update({k.replace("_", "-"): v for k, v in extra.items()})
        return headers

    async def post(self, body: Any, **headers: str) -> falcon.testing.Result:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await self.conductor.simulate_post("/mcp", body=raw, headers=self.headers(**headers))

    async def request(
        self, method: str, params: dict[str, Any] | None = None, id: int | str = 1, **headers: str
    ) -> falcon.testing.Result:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        return await self.post(message, **headers)

    async def call_tool(self, name: str, arguments: Any = None, **headers: str) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        result = await self.request("tools/call", params, **headers)
        assert result.status_code == 200, result.text
        body = result.json
        assert "result" in body, body
        return body["result"]  # type: ignore[no-any-return]


@pytest.fixture
def mcp(client: falcon.testing.ASGIConductor, token: str) -> Mcp:
    return Mcp(client, token)


async def open_session(mcp: Mcp, version: str = "2025-11-25") -> str:
    """``initialize`` like a client and return the ``Mcp-Session-Id`` handed out."""
    params = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "pytest", "version": "0"},
    }
    result = await mcp.request("initialize", params)
    assert result.status_code == 200, result.text
    return result.headers["mcp-session-id"]  # type: ignore[no-any-return]
