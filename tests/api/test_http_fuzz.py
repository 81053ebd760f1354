"""Property: whatever JSON a client posts to /mcp, the answer is JSON-RPC and never a 500.

Arbitrary JSON values and arbitrary Unicode, lone surrogates included (sent
as JSON's ``\\ud800`` escapes, as a client may), in every position: the id,
the method, the params, the tool name and every argument of every tool,
single messages and batches. No answer is HTTP 500, every body is a JSON-RPC
response (or a list of them), and no tool result is INTERNAL_ERROR.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from api.mcp.tools import tool_specs
from config.settings import Settings
from tests.api.conftest import PUBLIC_URL, Mcp

TOOLS = {name: spec.listing()["inputSchema"] for name, spec in tool_specs(Settings()).items()}
METHODS = ["initialize", "ping", "tools/list", "tools/call", "notifications/initialized"]


@pytest.fixture
def api_settings() -> Settings:
    # Room for 10,000-digit integers and long strings; the cap itself is tested elsewhere.
    return Settings(public_url=PUBLIC_URL, max_body_bytes=200_000, max_batch_size=5)


_lone = st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff"])
_texts = st.one_of(
    st.text(max_size=20),
    _lone,
    st.tuples(st.text(max_size=5), _lone, st.text(max_size=5)).map("".join),
    st.text(alphabet=st.characters(min_codepoint=0xD700, max_codepoint=0xE000), max_size=6),
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**300), max_value=10**300),
    st.floats(allow_nan=False, allow_infinity=False),
    _texts,
)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_texts, inner, max_size=4),
    max_leaves=12,
)


@st.composite
def _arguments(draw: st.DrawFn, tool: str) -> Any:
    props = list(TOOLS[tool].get("properties") or {})
    if draw(st.integers(0, 9)) == 0:
        return draw(_json)  # arguments that are not an object at all
    keys = st.one_of(st.sampled_from(props), _texts) if props else _texts
    return draw(st.dictionaries(keys, _json, max_size=len(props) + 2))


@st.composite
def _message(draw: st.DrawFn) -> Any:
    message: dict[str, Any] = {"jsonrpc": draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0"]))}
    if draw(st.booleans()) or draw(st.booleans()):
        message["id"] = draw(st.one_of(st.integers(), _texts, _json))
    message["method"] = draw(st.one_of(st.sampled_from(METHODS), _texts))
    if message["method"] == "tools/call" and draw(st.integers(0, 4)):
        tool = draw(st.sampled_from(sorted(TOOLS)))
        name: Any = tool if draw(st.integers(0, 5)) else draw(_json)
        message["params"] = {"name": name, "arguments": draw(_arguments(tool))}
    elif draw(st.booleans()):
        message["params"] = draw(_json)
    return message if draw(st.integers(0, 9)) else draw(_json)


_bodies = st.one_of(_message(), st.lists(_message(), min_size=1, max_size=4))


def _check_response(response: Any) -> None:
    assert isinstance(response, dict) and response.get("jsonrpc") == "2.0", response
    assert "id" in response and (("result" in response) != ("error" in response)), response
    result = response.get("result")
    if isinstance(result, dict) and "isError" in result:
        error = result["structuredContent"].get("error") or {}
        assert error.get("code") != "INTERNAL_ERROR", result


@hsettings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=_bodies)
async def test_any_json_gets_a_json_rpc_answer(mcp: Mcp, body: Any) -> None:
    # ensure_ascii: lone surrogates go out as \u escapes, the only way JSON text can carry them.
    result = await mcp.post(json.dumps(body, ensure_ascii=True).encode())
    assert result.status_code in (200, 202, 400), (result.status_code, result.text)
    if result.status_code == 202:
        assert result.content == b""
        return
    reply = json.loads(result.content)
    for response in reply if isinstance(reply, list) else [reply]:
        _check_response(response)


@pytest.mark.parametrize(
    "fragment",
    [
        "1e999",
        "-1e999",
        "9" * 10_000,
        "1" + "0" * 4300,
        "[" * 5000 + "]" * 5000,
        '"\\ud800"',
        '{"a":1,"a":"\\udfff"}',
        "NaN",
        "Infinity",
    ],
)
@pytest.mark.parametrize("position", ["id", "method", "params", "argument"])
async def test_extreme_literals_in_every_position(mcp: Mcp, fragment: str, position: str) -> None:
    fields = {
        "id": "1",
        "method": '"tools/call"',
        "params": '{"name":"recall","arguments":{"query":"x"}}',
    }
    if position == "argument":
        fields["params"] = '{"name":"recall","arguments":{"query":"x","limit":%s}}' % fragment  # noqa: UP031 (a JSON template: braces stay literal)
    else:
        fields[position] = fragment
    body = '{"jsonrpc":"2.0","id":%(id)s,"method":%(method)s,"params":%(params)s}' % fields  # noqa: UP031 (a JSON template: braces stay literal)
    result = await mcp.post(body.encode())
    assert result.status_code in (200, 400), (result.status_code, result.text[:300])
    _check_response(json.loads(result.content))
