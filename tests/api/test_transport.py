"""/mcp as an MCP Streamable HTTP endpoint: lifecycle, envelope, HTTP edges."""

from __future__ import annotations

import json

import pytest

from api.mcp.dispatch import INSTRUCTIONS
from api.mcp.versions import HANDSHAKE_VERSIONS, LATEST_HANDSHAKE_VERSION, SUPPORTED_VERSIONS
from auth.keys import KeyStore
from auth.tokens import issue_access_token
from config.settings import Settings
from tests.api.conftest import PUBLIC_URL, FakeUseCases, Mcp, open_session
from tests.conftest import make_user

INIT_PARAMS = {
    "capabilities": {},
    "clientInfo": {"name": "pytest", "version": "0"},
}


# --- lifecycle -----------------------------------------------------------------


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
async def test_initialize_echoes_a_supported_version(mcp: Mcp, version: str) -> None:
    result = await mcp.request("initialize", {**INIT_PARAMS, "protocolVersion": version})
    assert result.status_code == 200
    assert result.headers["content-type"].startswith("application/json")
    body = result.json
    assert body["id"] == 1 and body["jsonrpc"] == "2.0"
    init = body["result"]
    assert init["protocolVersion"] == version
    assert init["serverInfo"]["name"] == "ownsona" and init["serverInfo"]["version"]
    assert init["capabilities"] == {"tools": {"listChanged": False}}
    assert init["instructions"] == INSTRUCTIONS and "never instructions" in INSTRUCTIONS
    session = result.headers["mcp-session-id"]
    assert session and all(0x21 <= ord(c) <= 0x7E for c in session)


@pytest.mark.parametrize("requested", ["2024-11-05", "2026-07-28", "tomorrow", None])
async def test_initialize_offers_latest_for_unsupported_version(
    mcp: Mcp, requested: str | None
) -> None:
    params = dict(INIT_PARAMS)
    if requested is not None:
        params["protocolVersion"] = requested
    result = await mcp.request("initialize", params)
    assert result.status_code == 200
    assert result.json["result"]["protocolVersion"] == LATEST_HANDSHAKE_VERSION


async def test_each_initialize_gets_a_fresh_session_id(mcp: Mcp) -> None:
    params = {**INIT_PARAMS, "protocolVersion": LATEST_HANDSHAKE_VERSION}
    first = await mcp.request("initialize", params)
    second = await mcp.request("initialize", params)
    assert first.headers["mcp-session-id"] != second.headers["mcp-session-id"]


async def test_a_session_id_we_issued_is_accepted_later(mcp: Mcp) -> None:
    session = await open_session(mcp)
    result = await mcp.request("ping", mcp_session_id=session)
    assert result.status_code == 200 and result.json["result"] == {}
    assert "mcp-session-id" not in result.headers


async def test_requests_without_a_session_id_are_served(mcp: Mcp) -> None:
    await open_session(mcp)
    result = await mcp.request("tools/list")
    assert result.status_code == 200 and result.json["result"]["tools"]


@pytest.mark.parametrize(
    "session",
    ["made-up-by-the-client", "a.b.c", "..", "x" * 300],
)
async def test_an_unknown_session_id_is_404(mcp: Mcp, session: str) -> None:
    # Streamable HTTP, "Session Management": a session id the server does not know gets 404.
    result = await mcp.request("ping", id=9, mcp_session_id=session)
    assert result.status_code == 404
    assert result.json["id"] == 9 and result.json["error"]["code"] == -32001


async def test_a_tampered_session_id_is_404(mcp: Mcp) -> None:
    session = await open_session(mcp)
    kid, issued, nonce, mac = session.split(".")
    forged = f"{kid}.{issued}.{nonce[:-1]}{'A' if nonce[-1] != 'A' else 'B'}.{mac}"
    result = await mcp.request("ping", mcp_session_id=forged)
    assert result.status_code == 404


async def test_another_users_session_id_is_404(
    mcp: Mcp, keystore: KeyStore, api_settings: Settings, clean_db: str
) -> None:
    session = await open_session(mcp)
    bob = issue_access_token(
        keystore,
        api_settings,
        user_id=make_user(clean_db, "bob"),
        client_id="c",
        scope="memory:read",
    )
    result = await Mcp(mcp.conductor, bob).request("ping", mcp_session_id=session)
    assert result.status_code == 404


async def test_a_deleted_session_is_404_afterwards(mcp: Mcp) -> None:
    # The conformance scenario server-session-lifecycle: initialize, use, DELETE, use again.
    session = await open_session(mcp)
    assert (await mcp.request("tools/list", mcp_session_id=session)).status_code == 200
    ended = await mcp.conductor.simulate_delete("/mcp", headers=mcp.headers(mcp_session_id=session))
    assert ended.status_code == 204
    again = await mcp.request("tools/list", id=4, mcp_session_id=session)
    assert again.status_code == 404 and again.json["id"] == 4
    call = await mcp.request(
        "tools/call", {"name": "recall", "arguments": {"query": "x"}}, mcp_session_id=session
    )
    assert call.status_code == 404
    deleted_twice = await mcp.conductor.simulate_delete(
        "/mcp", headers=mcp.headers(mcp_session_id=session)
    )
    assert deleted_twice.status_code == 404


async def test_initialize_with_an_ended_session_id_opens_a_new_session(mcp: Mcp) -> None:
    session = await open_session(mcp)
    await mcp.conductor.simulate_delete("/mcp", headers=mcp.headers(mcp_session_id=session))
    params = {**INIT_PARAMS, "protocolVersion": LATEST_HANDSHAKE_VERSION}
    result = await mcp.request("initialize", params, mcp_session_id=session)
    assert result.status_code == 200
    fresh = result.headers["mcp-session-id"]
    assert fresh != session
    assert (await mcp.request("ping", mcp_session_id=fresh)).status_code == 200


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}},
        {"jsonrpc": "2.0", "method": "notifications/whatever"},
        {"jsonrpc": "2.0", "id": 7, "result": {}},
        {"jsonrpc": "2.0", "id": 8, "error": {"code": -1, "message": "no"}},
    ],
)
async def test_notifications_and_client_responses_get_202(mcp: Mcp, message: dict) -> None:
    result = await mcp.post(message)
    assert result.status_code == 202
    assert result.content == b""


async def test_ping(mcp: Mcp) -> None:
    result = await mcp.request("ping", id="abc")
    assert result.json == {"jsonrpc": "2.0", "id": "abc", "result": {}}


async def test_delete_with_session_id_is_204(mcp: Mcp) -> None:
    session = await open_session(mcp)
    result = await mcp.conductor.simulate_delete(
        "/mcp", headers=mcp.headers(mcp_session_id=session)
    )
    assert result.status_code == 204


async def test_delete_of_an_unknown_session_is_404(mcp: Mcp) -> None:
    result = await mcp.conductor.simulate_delete("/mcp", headers=mcp.headers(mcp_session_id="s1"))
    assert result.status_code == 404


async def test_delete_without_session_id_is_400(mcp: Mcp) -> None:
    result = await mcp.conductor.simulate_delete("/mcp", headers=mcp.headers())
    assert result.status_code == 400


# --- protocol version header --------------------------------------------------


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
async def test_supported_version_header_passes(mcp: Mcp, version: str) -> None:
    result = await mcp.request("ping", mcp_protocol_version=version)
    assert result.status_code == 200


async def test_unsupported_version_header_is_400_with_jsonrpc_error(mcp: Mcp) -> None:
    result = await mcp.request("tools/list", id=4, mcp_protocol_version="1999-01-01")
    assert result.status_code == 400
    body = result.json
    assert body["jsonrpc"] == "2.0" and body["id"] == 4
    assert body["error"]["code"] == -32022
    assert body["error"]["data"] == {
        "supported": list(SUPPORTED_VERSIONS),
        "requested": "1999-01-01",
    }


async def test_unsupported_version_header_on_notification_is_400(mcp: Mcp) -> None:
    message = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    result = await mcp.post(message, mcp_protocol_version="x")
    assert result.status_code == 400
    assert result.json["id"] is None


# --- JSON-RPC envelope ---------------------------------------------------------


async def test_unknown_method_is_32601(mcp: Mcp) -> None:
    result = await mcp.request("resources/list", id=9)
    assert result.status_code == 200
    assert result.json["id"] == 9
    assert result.json["error"]["code"] == -32601


@pytest.mark.parametrize(
    "body", [b"{not json", b"", b"\xff\xfe{}", b'{"jsonrpc": "2.0", "id": NaN}']
)
async def test_malformed_json_is_32700(mcp: Mcp, body: bytes) -> None:
    result = await mcp.post(body)
    assert result.status_code == 400
    assert result.json["error"]["code"] == -32700
    assert result.json["id"] is None


@pytest.mark.parametrize("body", [42, "ping", None, True, {"id": 1, "method": "ping"}])
async def test_non_request_is_32600(mcp: Mcp, body: object) -> None:
    result = await mcp.post(json.dumps(body).encode())
    assert result.status_code == 400
    assert result.json["error"]["code"] == -32600


async def test_missing_jsonrpc_field_keeps_the_id(mcp: Mcp) -> None:
    result = await mcp.post({"id": 5, "method": "ping"})
    assert result.status_code == 400
    assert result.json["id"] == 5 and result.json["error"]["code"] == -32600


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": None, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
        {"jsonrpc": "2.0", "id": True, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": 3},
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": "x"},
        {"jsonrpc": "2.0", "id": 1},
    ],
)
async def test_invalid_requests_are_32600(mcp: Mcp, message: dict) -> None:
    result = await mcp.post(message)
    assert result.status_code == 400
    assert result.json["error"]["code"] == -32600


async def test_array_params_are_32602(mcp: Mcp) -> None:
    result = await mcp.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": []})
    assert result.json["error"]["code"] == -32602


# --- bytes a client may send: never a 500 ----------------------------------------

LONE = "\\ud800"  # the JSON escape of a lone surrogate, as raw body text


def _raw(text: str) -> bytes:
    return text.encode()


async def test_a_lone_surrogate_id_is_32600_with_a_null_id(mcp: Mcp) -> None:
    result = await mcp.post(_raw(f'{{"jsonrpc":"2.0","id":"{LONE}","method":"ping"}}'))
    assert result.status_code == 400
    assert result.json == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": result.json["error"]["message"]},
    }


def _strict_json(content: bytes) -> object:
    """The body as a strict parser reads it: UTF-8 text with no lone surrogate anywhere.

    ``json.loads`` accepts a ``\\ud800`` escape; many parsers (and UTF-8) do not.
    """
    decoded = json.loads(content.decode("utf-8"))
    json.dumps(decoded, ensure_ascii=False).encode("utf-8")  # raises on a lone surrogate
    return decoded


async def test_a_lone_surrogate_method_is_echoed_as_a_replacement_character(mcp: Mcp) -> None:
    result = await mcp.post(_raw(f'{{"jsonrpc":"2.0","id":3,"method":"x{LONE}"}}'))
    assert result.status_code == 200
    body = _strict_json(result.content)
    assert body["id"] == 3 and body["error"]["code"] == -32601
    assert "x\ufffd" in body["error"]["message"]


@pytest.mark.parametrize(
    "body",
    [
        f'{{"jsonrpc":"2.0","id":1,"method":"{LONE}"}}',
        f'[{{"jsonrpc":"2.0","id":1,"method":"a{LONE}"}},{{"jsonrpc":"2.0","id":2,"method":"ping"}}]',
        f'{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t{LONE}"}}}}',
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"recall",'
        f'"arguments":{{"{LONE}":"x"}}}}}}',
        f'{{"jsonrpc":"2.0","id":"{LONE}","method":"x{LONE}"}}',
        f'{{"jsonrpc":"2.0","method":"x{LONE}"}}',
    ],
)
async def test_every_reply_to_a_lone_surrogate_is_strict_json(mcp: Mcp, body: str) -> None:
    result = await mcp.post(_raw(body))
    assert result.status_code in (200, 202, 400)
    if result.content:
        _strict_json(result.content)


async def test_a_lone_surrogate_tool_name_is_an_unknown_tool(mcp: Mcp) -> None:
    body = f'{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{LONE}"}}}}'
    result = await mcp.post(_raw(body))
    assert result.status_code == 200 and result.json["error"]["code"] == -32602


@pytest.mark.parametrize(
    "arguments",
    [
        f'{{"query":"a{LONE}"}}',
        f'{{"query":"x","tags":["{LONE}"]}}',
        f'{{"{LONE}":"x","query":"y"}}',
        '{"query":"x","filter":{"deep":[[{"k":"\\udfff"}]]}}',
    ],
)
async def test_a_lone_surrogate_in_arguments_is_invalid_input(
    mcp: Mcp, use_cases: FakeUseCases, arguments: str
) -> None:
    body = (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call",'
        f'"params":{{"name":"recall","arguments":{arguments}}}}}'
    )
    result = await mcp.post(_raw(body))
    assert result.status_code == 200
    tool = result.json["result"]
    assert tool["isError"] is True
    assert tool["structuredContent"]["error"]["code"] == "INVALID_INPUT"
    assert use_cases.calls == []


async def test_a_surrogate_pair_is_text(mcp: Mcp, use_cases: FakeUseCases) -> None:
    # An escaped pair is one character (U+1F600), not a lone surrogate.
    body = (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call",'
        '"params":{"name":"recall","arguments":{"query":"\\ud83d\\ude00"}}}'
    )
    result = await mcp.post(_raw(body))
    assert result.json["result"]["isError"] is False
    assert use_cases.calls[0][2].query == "\U0001f600"  # type: ignore[attr-defined]


async def test_a_lone_surrogate_id_in_a_batch_is_answered_in_place(mcp: Mcp) -> None:
    body = '[{"jsonrpc":"2.0","id":"%s","method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]'
    result = await mcp.post(_raw(body % LONE))
    assert result.status_code == 200
    first, second = result.json
    assert first["id"] is None and first["error"]["code"] == -32600
    assert second == {"jsonrpc": "2.0", "id": 2, "result": {}}


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 2000 + b"]" * 2000,  # deeper than the parser recurses: RecursionError
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":Infinity}}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":-Infinity}}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping"',
        b"\xc3\x28",
        b"   ",
    ],
)
async def test_bodies_json_lacks_are_32700(mcp: Mcp, body: bytes) -> None:
    result = await mcp.post(body)
    assert result.status_code == 400
    assert result.json["error"]["code"] == -32700 and result.json["id"] is None


# --- batches (2025-03-26 only) --------------------------------------------------


async def test_batch_is_served_for_2025_03_26(mcp: Mcp) -> None:
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "nope"},
        {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": INIT_PARAMS},
        "garbage",
    ]
    result = await mcp.post(batch, mcp_protocol_version="2025-03-26")
    assert result.status_code == 200
    answers = result.json
    assert [a["id"] for a in answers] == [1, 2, 3, None]
    assert answers[0]["result"] == {}
    assert answers[1]["error"]["code"] == -32601
    assert answers[2]["error"]["code"] == -32600
    assert answers[3]["error"]["code"] == -32600


async def test_batch_of_notifications_is_202(mcp: Mcp) -> None:
    batch = [{"jsonrpc": "2.0", "method": "notifications/initialized"}]
    result = await mcp.post(batch)
    assert result.status_code == 202


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_batch_is_refused_from_2025_06_18(mcp: Mcp, version: str) -> None:
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}]
    result = await mcp.post(batch, mcp_protocol_version=version)
    assert result.status_code == 400
    assert result.json["error"]["code"] == -32600


async def test_empty_and_oversized_batches_are_refused(mcp: Mcp) -> None:
    assert (await mcp.post([])).json["error"]["code"] == -32600
    many = [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(6)]  # cap is 5 in tests
    result = await mcp.post(many)
    assert result.status_code == 400 and result.json["error"]["code"] == -32600


# --- HTTP edges ------------------------------------------------------------------


async def test_body_too_large_is_413(mcp: Mcp) -> None:
    big = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 5000}}
    result = await mcp.post(big)
    assert result.status_code == 413
    assert result.json["error"]["code"] == -32600


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
async def test_wrong_content_type_is_415(mcp: Mcp, content_type: str | None) -> None:
    headers = mcp.headers()
    del headers["Content-Type"]
    if content_type is not None:
        headers["Content-Type"] = content_type
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    result = await mcp.conductor.simulate_post("/mcp", body=body, headers=headers)
    assert result.status_code == 415
    assert result.json["error"]["code"] == -32600


async def test_content_type_with_charset_is_fine(mcp: Mcp) -> None:
    result = await mcp.request("ping", content_type="application/json; charset=utf-8")
    assert result.status_code == 200


async def test_accept_header_is_not_enforced(mcp: Mcp) -> None:
    result = await mcp.request("ping", accept="text/event-stream")
    assert result.status_code == 200
    assert result.headers["content-type"].startswith("application/json")


async def test_get_is_405(mcp: Mcp) -> None:
    result = await mcp.conductor.simulate_get("/mcp", headers=mcp.headers())
    assert result.status_code == 405
    assert result.headers["allow"] == "POST, DELETE, OPTIONS"


async def test_trailing_slash_is_served(mcp: Mcp) -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    result = await mcp.conductor.simulate_post("/mcp/", body=body, headers=mcp.headers())
    assert result.status_code == 200


# --- origins and CORS --------------------------------------------------------------


@pytest.mark.parametrize(
    "origin", ["https://evil.example", "null", "http://mem.example", "http://localhost.evil.com"]
)
async def test_foreign_origin_is_403(mcp: Mcp, origin: str) -> None:
    result = await mcp.request("ping", origin=origin)
    assert result.status_code == 403
    assert result.json["error"]["code"] == -32600
    assert "access-control-allow-origin" not in result.headers


@pytest.mark.parametrize(
    "origin",
    [
        "http://localhost:6274",
        "http://127.0.0.1:3000",
        "http://[::1]:8080",
        "http://localhost",
        PUBLIC_URL,
    ],
)
async def test_allowed_origins_get_cors_headers(mcp: Mcp, origin: str) -> None:
    result = await mcp.request("ping", origin=origin)
    assert result.status_code == 200
    assert result.headers["access-control-allow-origin"] == origin
    assert "mcp-session-id" in result.headers["access-control-expose-headers"]
    assert "www-authenticate" in result.headers["access-control-expose-headers"]


async def test_preflight_needs_no_token(mcp: Mcp) -> None:
    result = await mcp.conductor.simulate_options(
        "/mcp",
        headers={
            "Origin": "http://localhost:6274",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version",
        },
    )
    assert result.status_code == 204
    assert result.headers["access-control-allow-origin"] == "http://localhost:6274"
    assert result.headers["access-control-allow-methods"] == "POST, GET, DELETE, OPTIONS"
    allowed = {h.strip() for h in result.headers["access-control-allow-headers"].split(",")}
    needed = {"authorization", "content-type", "mcp-protocol-version", "mcp-session-id"}
    assert needed | {"last-event-id"} <= allowed
    assert int(result.headers["access-control-max-age"]) > 0


async def test_preflight_from_foreign_origin_is_403(mcp: Mcp) -> None:
    headers = {"Origin": "https://evil.example"}
    result = await mcp.conductor.simulate_options("/mcp", headers=headers)
    assert result.status_code == 403


async def test_foreign_origin_get_is_403(mcp: Mcp) -> None:
    result = await mcp.conductor.simulate_get("/mcp", headers={"Origin": "https://evil.example"})
    assert result.status_code == 403


# --- authentication ------------------------------------------------------------------


async def test_no_token_is_401_with_resource_metadata(mcp: Mcp) -> None:
    result = await mcp.conductor.simulate_post(
        "/mcp",
        body=b'{"jsonrpc":"2.0","id":1,"method":"initialize"}',
        headers={"Content-Type": "application/json"},
    )
    assert result.status_code == 401
    challenge = result.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{PUBLIC_URL}/.well-known/oauth-protected-resource"' in challenge
    assert "error=" not in challenge  # RFC 6750 §3.1: no error code without a token
    assert result.json["error"] and result.json["error_description"]
    assert result.json["code"] == "AUTH_REQUIRED"


async def test_bad_token_is_401_invalid_token(mcp: Mcp) -> None:
    mcp.token = "not.a.jwt"
    result = await mcp.request("ping")
    assert result.status_code == 401
    assert 'error="invalid_token"' in result.headers["www-authenticate"]
    assert result.json["error"] == "invalid_token" and result.json["code"] == "AUTH_FAILED"


@pytest.mark.parametrize("body", [b"{broken", b"x" * 10_000, b""])
async def test_401_comes_before_any_body_check(mcp: Mcp, body: bytes) -> None:
    headers = {"Content-Type": "text/plain"}
    result = await mcp.conductor.simulate_post("/mcp", body=body, headers=headers)
    assert result.status_code == 401


async def test_401_carries_cors_headers_for_browser_clients(mcp: Mcp) -> None:
    result = await mcp.conductor.simulate_post(
        "/mcp",
        body=b"{}",
        headers={"Content-Type": "application/json", "Origin": "http://localhost:6274"},
    )
    assert result.status_code == 401
    assert result.headers["access-control-allow-origin"] == "http://localhost:6274"


async def test_delete_needs_a_token(mcp: Mcp) -> None:
    result = await mcp.conductor.simulate_delete("/mcp", headers={"Mcp-Session-Id": "s"})
    assert result.status_code == 401
