"""create_app: the lifespan opens and closes, body caps, and no 500 from /mcp for any body."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import falcon.testing
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from api.app import create_app
from api.runtime import Runtime
from config.settings import Settings
from tests.api.conftest import FakeUseCases, Mcp


async def test_the_lifespan_opens_on_startup_and_closes_on_shutdown(
    api_settings: Settings, runtime: Runtime, token: str
) -> None:
    events: list[str] = []

    class Lifespan:
        async def open(self) -> None:
            events.append("open")

        async def close(self) -> None:
            events.append("close")

    app = create_app(
        api_settings,
        runtime=dataclasses.replace(runtime, run_inline=FakeUseCases()),
        lifespan=Lifespan(),
    )
    assert events == []  # building the app opens nothing
    async with falcon.testing.ASGIConductor(app) as conductor:
        assert events == ["open"]
        result = await Mcp(conductor, token).request("ping")
        assert result.status_code == 200
    assert events == ["open", "close"]


async def test_a_given_runtime_is_not_closed(api_settings: Settings, runtime: Runtime) -> None:
    app = _app(api_settings, runtime)
    async with falcon.testing.ASGIConductor(app) as conductor:
        assert (await conductor.simulate_get("/healthz")).status_code == 200


async def test_declared_oversized_body_is_refused_on_other_routes(
    client: falcon.testing.ASGIConductor,
) -> None:
    result = await client.simulate_post("/healthz", body=b"x" * 5000)
    assert result.status_code == 413


def _app(api_settings: Settings, runtime: Runtime) -> Any:
    use_cases: Any = FakeUseCases()
    return create_app(api_settings, runtime=dataclasses.replace(runtime, run_inline=use_cases))


async def _raw_post(
    app: Any, chunks: list[bytes], headers: list[tuple[bytes, bytes]]
) -> tuple[int, bytes]:
    """One POST /mcp straight through ASGI, body in chunks and no Content-Length."""
    last = len(chunks) - 1
    pending = [
        {"type": "http.request", "body": chunk, "more_body": i < last}
        for i, chunk in enumerate(chunks)
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "https",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("mem.example", 443),
    }
    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, body


async def test_streamed_body_is_capped_while_reading(
    api_settings: Settings, runtime: Runtime, token: str
) -> None:
    app = _app(api_settings, runtime)
    headers = [
        (b"authorization", f"Bearer {token}".encode()),
        (b"content-type", b"application/json"),
    ]
    status, body = await _raw_post(app, [b"[" + b" " * 3000, b" " * 3000, b"]"], headers)
    assert status == 413
    assert json.loads(body)["error"]["code"] == -32600

    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    status, body = await _raw_post(app, [ping[:10], ping[10:]], headers)
    assert status == 200 and json.loads(body)["result"] == {}


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_call_params = st.fixed_dictionaries({"name": st.text(max_size=15), "arguments": _json})
_messages = st.fixed_dictionaries(
    {
        "jsonrpc": st.sampled_from(["2.0", "1.0"]),
        "method": st.sampled_from(["tools/call", "initialize", "ping", "x"]),
    },
    optional={"id": _json, "params": _json | _call_params},
)
_bodies = st.binary(max_size=200) | (_json | _messages).map(lambda v: json.dumps(v).encode())


@hsettings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=_bodies)
async def test_no_body_makes_a_500(mcp: Mcp, body: bytes) -> None:
    result = await mcp.post(body)
    assert result.status_code in (200, 202, 400, 413)
    if result.status_code != 202:
        reply = result.json
        assert isinstance(reply, (dict, list))
