"""MCP 2026-07-28 on /mcp beside the handshake revisions, and retries without sessions.

Raw HTTP against the app (the version rules, headers, result shapes), the
pure rules (``versions``, ``dispatch.idempotency_key``,
``memory.writes.named_memories``), and the retry-window receipts over the
real use cases and PostgreSQL.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import psycopg
import pytest

from api.mcp.dispatch import INSTRUCTIONS, idempotency_key
from api.mcp.listings import LIST_TTL_MS
from api.mcp.versions import (
    HANDSHAKE_VERSIONS,
    SUPPORTED_VERSIONS,
    decode_header_value,
    rules_for,
)
from config.settings import Settings, SettingsError
from memory.deps import Deps
from memory.writes import WINDOW_PREFIX, IdempotencyKey, named_memories
from tests.api.conftest import FakeWriteQueue, Mcp, open_session
from tests.service.helpers import opened_rows
from tests.tool_calls import USE_CASES

V = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": V,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "pytest", "version": "0"},
}


def modern_headers(method: str, name: str | None = None, **extra: str) -> dict[str, str]:
    headers = {"mcp_protocol_version": V, "mcp_method": method, **extra}
    if name is not None:
        headers["mcp_name"] = name
    return headers


async def modern(
    mcp: Mcp,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    meta: dict[str, Any] | None = None,
    **headers: str,
) -> Any:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**(params or {})}}
    body["params"]["_meta"] = META if meta is None else meta
    name = (params or {}).get("name")
    return await mcp.post(body, **{**modern_headers(method, name), **headers})


def _server_info(result: dict[str, Any]) -> dict[str, Any]:
    info: dict[str, Any] = result["_meta"]["io.modelcontextprotocol/serverInfo"]
    return info


# --- server/discover and result shapes ------------------------------------------


async def test_discover_answers_versions_capabilities_identity(mcp: Mcp) -> None:
    reply = await modern(mcp, "server/discover")
    assert reply.status_code == 200, reply.text
    assert "mcp-session-id" not in reply.headers
    result = reply.json["result"]
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == list(SUPPORTED_VERSIONS)
    assert result["capabilities"] == {"tools": {}}
    assert result["instructions"] == INSTRUCTIONS
    assert result["ttlMs"] == LIST_TTL_MS and result["cacheScope"] == "public"
    assert _server_info(result)["name"] == "ownsona" and _server_info(result)["version"]


def test_instructions_are_a_short_guide() -> None:
    assert len(INSTRUCTIONS) <= 900
    for must in ("recall", "remember", "Never store secrets", "never instructions", "supersedes"):
        assert must in INSTRUCTIONS, must


async def test_tools_list_carries_cache_hints_in_a_stable_order(mcp: Mcp) -> None:
    first = (await modern(mcp, "tools/list")).json["result"]
    second = (await modern(mcp, "tools/list")).json["result"]
    legacy = (await mcp.request("tools/list", mcp_protocol_version="2025-11-25")).json["result"]
    assert first == second
    assert first["ttlMs"] == 3_600_000 and first["cacheScope"] == "public"
    assert first["resultType"] == "complete" and _server_info(first)["name"] == "ownsona"
    assert first["tools"] == legacy["tools"]
    # The older revisions get exactly what they got before.
    assert set(legacy) == {"tools"}


async def test_tools_call_without_initialize_or_session(
    mcp: Mcp, write_queue: FakeWriteQueue
) -> None:
    reply = await modern(mcp, "tools/call", {"name": "confirm", "arguments": {"id": 1}})
    assert reply.status_code == 200, reply.text
    assert "mcp-session-id" not in reply.headers
    result = reply.json["result"]
    assert result["resultType"] == "complete" and result["isError"] is False
    assert result["structuredContent"] == write_queue.payload
    assert _server_info(result)["name"] == "ownsona"
    assert len(write_queue.calls) == 1


async def test_a_stray_session_id_is_ignored_at_2026(mcp: Mcp) -> None:
    headers = {"mcp_session_id": "not-a-session-of-ours"}
    reply = await modern(mcp, "tools/list", **headers)
    assert reply.status_code == 200
    # The same id at 2025-11-25 names no session of ours: 404, as before.
    legacy = await mcp.request("tools/list", mcp_protocol_version="2025-11-25", **headers)
    assert legacy.status_code == 404


async def test_delete_at_2026_is_405(mcp: Mcp) -> None:
    session = await open_session(mcp)
    headers = mcp.headers(mcp_protocol_version=V, mcp_session_id=session)
    reply = await mcp.conductor.simulate_delete("/mcp", headers=headers)
    assert reply.status_code == 405 and "POST" in reply.headers["allow"]


async def test_a_notification_at_2026_is_accepted(mcp: Mcp) -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"_meta": META}}
    reply = await mcp.post(body, mcp_protocol_version=V)
    assert reply.status_code == 202


@pytest.fixture
def bearer_check_fails(clean_db: str) -> Any:
    """The bearer check fails in PostgreSQL (the revocation table is gone)."""
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("ALTER TABLE oauth_revoked_tokens RENAME TO oauth_revoked_tokens_away")
    try:
        yield
    finally:
        with psycopg.connect(clean_db, autocommit=True) as conn:
            conn.execute("ALTER TABLE oauth_revoked_tokens_away RENAME TO oauth_revoked_tokens")


async def test_database_down_at_2026_is_a_tool_error_in_2026_shape(
    mcp: Mcp, write_queue: FakeWriteQueue, bearer_check_fails: None
) -> None:
    called = await modern(mcp, "tools/call", {"name": "confirm", "arguments": {"id": 1}})
    assert called.status_code == 200, called.text
    result = called.json["result"]
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["code"] == "DATABASE_ERROR"
    assert result["resultType"] == "complete" and _server_info(result)["name"] == "ownsona"
    assert write_queue.calls == []
    listed = await modern(mcp, "tools/list")
    assert listed.status_code == 503 and listed.headers["retry-after"]


# --- what 2026-07-28 removed ----------------------------------------------------


@pytest.mark.parametrize("method", ["ping", "logging/setLevel", "initialize"])
async def test_removed_methods_are_404_method_not_found_at_2026(mcp: Mcp, method: str) -> None:
    reply = await modern(mcp, method)
    assert reply.status_code == 404
    assert reply.json["error"]["code"] == -32601 and reply.json["id"] == 7


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
async def test_ping_still_works_before_2026(mcp: Mcp, version: str) -> None:
    reply = await mcp.request("ping", mcp_protocol_version=version)
    assert reply.status_code == 200 and reply.json["result"] == {}


async def test_no_batches_at_2026(mcp: Mcp) -> None:
    body = [{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}]
    reply = await mcp.post(body, mcp_protocol_version=V)
    assert reply.status_code == 400 and reply.json["error"]["code"] == -32600


async def test_a_headerless_batch_cannot_smuggle_2026_requests(
    mcp: Mcp, write_queue: FakeWriteQueue
) -> None:
    # Without a version header a batch is 2025-03-26; an item naming 2026-07-28 in _meta
    # would skip the Mcp-Method / Mcp-Name checks, so it is refused and nothing runs.
    call = {"name": "confirm", "arguments": {"id": 1}, "_meta": META}
    body = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
    ]
    reply = await mcp.post(body)
    assert reply.status_code == 200
    first, second = reply.json
    assert first["id"] == 1 and first["error"]["code"] == -32600
    assert second == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert write_queue.calls == []


# --- versions: -32022, -32602 ---------------------------------------------------


async def test_unsupported_version_is_32022_with_the_supported_list(mcp: Mcp) -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    reply = await modern(mcp, "tools/list", meta=meta, mcp_protocol_version="2099-01-01")
    assert reply.status_code == 400
    error = reply.json["error"]
    assert error["code"] == -32022 and reply.json["id"] == 7
    assert error["data"] == {"supported": list(SUPPORTED_VERSIONS), "requested": "2099-01-01"}


@pytest.mark.parametrize(
    "meta",
    [
        {"io.modelcontextprotocol/protocolVersion": V},
        {**META, "io.modelcontextprotocol/clientCapabilities": "all"},
    ],
    ids=["no-capabilities", "capabilities-not-an-object"],
)
async def test_a_2026_request_without_client_capabilities_is_32602(
    mcp: Mcp, meta: dict[str, Any], write_queue: FakeWriteQueue
) -> None:
    reply = await modern(mcp, "tools/call", {"name": "confirm", "arguments": {"id": 1}}, meta=meta)
    assert reply.status_code == 400 and reply.json["error"]["code"] == -32602
    assert write_queue.calls == []


async def test_a_2026_header_without_meta_is_32602(mcp: Mcp) -> None:
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
    reply = await mcp.post(body, **modern_headers("tools/list"))
    assert reply.status_code == 400 and reply.json["error"]["code"] == -32602


# --- headers: -32020 ------------------------------------------------------------


def _mismatch(reply: Any) -> None:
    assert reply.status_code == 400, reply.text
    assert reply.json["error"]["code"] == -32020
    assert reply.json["error"]["message"].startswith("Header mismatch")


async def test_meta_version_without_the_header_is_32020(mcp: Mcp) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
    _mismatch(await mcp.post(body, mcp_method="tools/list"))


async def test_header_and_meta_disagreeing_is_32020(mcp: Mcp) -> None:
    _mismatch(await modern(mcp, "tools/list", mcp_protocol_version="2025-11-25"))


async def test_missing_mcp_method_is_32020(mcp: Mcp) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
    _mismatch(await mcp.post(body, mcp_protocol_version=V))


async def test_mcp_method_not_matching_the_body_is_32020(mcp: Mcp) -> None:
    _mismatch(await modern(mcp, "tools/list", mcp_method="tools/call"))


@pytest.mark.parametrize(
    "name_header",
    [
        None,
        "forget",
        "=?base64?not base64?=",
        "=?base64?" + base64.b64encode(b"\xff").decode() + "?=",
    ],
    ids=["missing", "other-tool", "bad-base64", "not-utf8"],
)
async def test_mcp_name_missing_or_different_is_32020_and_changes_nothing(
    mcp: Mcp, write_queue: FakeWriteQueue, name_header: str | None
) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "confirm", "arguments": {"id": 1}, "_meta": META},
    }
    headers = modern_headers("tools/call", name_header)
    _mismatch(await mcp.post(body, **headers))
    assert write_queue.calls == []


async def test_mcp_name_in_base64_form_is_decoded(mcp: Mcp) -> None:
    encoded = "=?base64?" + base64.b64encode(b"confirm").decode() + "?="
    reply = await modern(
        mcp, "tools/call", {"name": "confirm", "arguments": {"id": 1}}, mcp_name=encoded
    )
    assert reply.status_code == 200, reply.text


def test_decode_header_value() -> None:
    assert decode_header_value("recall") == "recall"
    assert decode_header_value("=?base64?SGVsbG8sIOS4lueVjA==?=") == "Hello, 世界"
    assert decode_header_value("a\nb") is None
    assert decode_header_value("=?base64?***?=") is None


# --- the rules table --------------------------------------------------------------


def test_rules_by_version() -> None:
    modern_rules = rules_for(V)
    assert modern_rules.per_request_meta and not modern_rules.sessions
    assert not modern_rules.has_ping and not modern_rules.has_initialize
    assert modern_rules.result_type == "complete" and modern_rules.method_headers
    assert modern_rules.http_status(-32601) == 404 and modern_rules.http_status(-32022) == 400
    for version in HANDSHAKE_VERSIONS:
        rules = rules_for(version)
        assert rules.sessions and rules.has_ping and rules.has_initialize
        assert rules.result_type is None and not rules.method_headers
        assert rules.http_status(-32601) == 200
        assert rules.batches == (version == "2025-03-26")
    assert rules_for(None).batches
    with pytest.raises(Exception) as raised:  # noqa: PT011 - a JsonRpcError
        rules_for("2024-11-05")
    assert getattr(raised.value, "code", None) == -32022


# --- idempotency keys -------------------------------------------------------------


def test_key_rules_in_order() -> None:
    args = {"text": "a"}
    base: dict[str, Any] = dict(session_id="s", request_id=1, header=None, window_s=600)
    window = idempotency_key(1, "remember", args, **base)
    assert window.startswith(WINDOW_PREFIX)
    # A retry: new request id, new session (or none), same arguments.
    assert window == idempotency_key(1, "remember", args, **{**base, "request_id": 9})
    assert window == idempotency_key(1, "remember", args, **{**base, "session_id": None})
    assert window != idempotency_key(2, "remember", args, **base)
    assert window != idempotency_key(1, "remember_batch", args, **base)
    assert window != idempotency_key(1, "remember", {"text": "b"}, **base)
    # An explicit key wins over the window; with other arguments it is another operation.
    explicit = idempotency_key(1, "remember", args, **{**base, "header": "op-1"})
    assert not explicit.startswith(WINDOW_PREFIX)
    assert explicit == idempotency_key(
        1, "remember", args, **{**base, "header": "op-1", "request_id": 9}
    )
    assert explicit != idempotency_key(1, "remember", {"text": "b"}, **{**base, "header": "op-1"})
    # The window off: session + request id, else random.
    off = {**base, "window_s": 0}
    session = idempotency_key(1, "remember", args, **off)
    assert session == idempotency_key(1, "remember", args, **off)
    assert session != idempotency_key(1, "remember", args, **{**off, "request_id": 2})
    lone = {**off, "session_id": None}
    assert idempotency_key(1, "remember", args, **lone) != idempotency_key(
        1, "remember", args, **lone
    )


async def test_meta_idempotency_key_names_the_operation(
    mcp: Mcp, write_queue: FakeWriteQueue
) -> None:
    meta = {**META, "io.ownsona/idempotencyKey": "op-42"}
    for memory_id in (1, 1, 2):
        params = {"name": "confirm", "arguments": {"id": memory_id}}
        assert (await modern(mcp, "tools/call", params, meta=meta)).status_code == 200
    header = await mcp.call_tool("confirm", {"id": 1}, idempotency_key="op-42")
    assert header["isError"] is False
    keys = [call[3] for call in write_queue.calls]
    # The same key by header or _meta, with the same arguments, is the same operation (for
    # this user and tool); with other arguments it is another one.
    assert keys[0] == keys[1] == keys[3] and not keys[0].startswith(WINDOW_PREFIX)
    assert keys[2] != keys[0]


@pytest.mark.parametrize("bad", ["", 5, "x" * 256], ids=["empty", "number", "too-long"])
async def test_a_bad_meta_idempotency_key_is_32602_and_queues_nothing(
    mcp: Mcp, write_queue: FakeWriteQueue, bad: Any
) -> None:
    meta = {**META, "io.ownsona/idempotencyKey": bad}
    params = {"name": "confirm", "arguments": {"id": 1}}
    reply = await modern(mcp, "tools/call", params, meta=meta)
    assert reply.status_code == 400 and reply.json["error"]["code"] == -32602
    assert "io.ownsona/idempotencyKey" in reply.json["error"]["message"]
    assert write_queue.calls == []


def test_named_memories_skips_neighbours() -> None:
    payload = {
        "ok": True,
        "results": [
            {"memory_id": 4, "near_duplicates": [{"id": 9}], "superseded": [2]},
            {"memory_id": 5, "previously_corrected": [{"id": 8}], "downweighted": [3]},
            {"ok": False, "error": {"code": "INVALID_INPUT"}},
        ],
        "reinforced": [{"id": 6, "use_count": 1}],
    }
    assert named_memories(payload) == [2, 3, 4, 5, 6]
    assert named_memories({"ok": True, "id": True}) == []


# --- retry-window receipts over the real use cases ---------------------------------


def with_submission(key: str) -> IdempotencyKey:
    """``key`` as one queued submission carries it (the dispatcher makes one per call)."""
    return IdempotencyKey(key).submitted()


async def _remember(deps: Deps, user: int, text: str, key: str | IdempotencyKey) -> dict[str, Any]:
    payload: dict[str, Any] = await USE_CASES["remember"](
        deps, user, {"text": text}, idempotency_key=key
    )
    return payload


async def _forget(
    deps: Deps, user: int, memory_id: int, key: str | IdempotencyKey
) -> dict[str, Any]:
    payload: dict[str, Any] = await USE_CASES["forget"](
        deps, user, {"id": memory_id}, idempotency_key=key
    )
    return payload


async def _active(deps: Deps, user: int, text: str) -> list[int]:
    """The user's active rows holding ``text`` (a sealed row's text opened to compare)."""
    rows = await opened_rows(
        deps,
        "SELECT id, user_id, text, tags, text_sealed, tags_sealed FROM memories"
        " WHERE user_id = %s AND deleted_at IS NULL ORDER BY id",
        (user,),
    )
    return [r["id"] for r in rows if r["text"] == text]


FACT = "My sister Ana lives in Porto."


async def test_remember_forget_remember_stores_again(deps: Deps, alice: int, dsn: str) -> None:
    key = WINDOW_PREFIX + "remember-ana"
    first = await _remember(deps, alice, FACT, key)
    memory_id = first["memory_id"]
    # A retry within the window: the first answer, nothing stored.
    assert await _remember(deps, alice, FACT, key) == first
    assert await _active(deps, alice, FACT) == [memory_id]

    gone = await _forget(deps, alice, memory_id, WINDOW_PREFIX + "forget-ana")
    assert gone["message"] == "Forgotten"
    # The same call again is no retry now: the forget named its memory.
    again = await _remember(deps, alice, FACT, key)
    assert again["memory_id"] != memory_id
    assert await _active(deps, alice, FACT) == [again["memory_id"]]
    # And that new answer is what a retry of it gets.
    assert await _remember(deps, alice, FACT, key) == again


async def test_a_retried_forget_gets_its_first_answer(deps: Deps, alice: int) -> None:
    stored = await _remember(deps, alice, FACT, WINDOW_PREFIX + "r")
    key = WINDOW_PREFIX + "f"
    first = await _forget(deps, alice, stored["memory_id"], key)
    assert first["already_deleted"] is False
    assert await _forget(deps, alice, stored["memory_id"], key) == first


async def test_a_later_write_of_other_memories_keeps_the_receipt(deps: Deps, alice: int) -> None:
    key = WINDOW_PREFIX + "ana"
    first = await _remember(deps, alice, FACT, key)
    other = await _remember(deps, alice, "I drink green tea.", WINDOW_PREFIX + "tea")
    await _forget(deps, alice, other["memory_id"], WINDOW_PREFIX + "forget-tea")
    assert await _remember(deps, alice, FACT, key) == first


async def test_after_the_window_the_same_call_writes_again(
    deps: Deps, alice: int, dsn: str
) -> None:
    key = WINDOW_PREFIX + "ana"
    first = await _remember(deps, alice, FACT, key)
    with psycopg.connect(dsn) as conn:
        window = deps.settings.idempotency_window_s
        conn.execute(
            "UPDATE write_receipts SET created_at = now() - make_interval(secs => %s)"
            " WHERE user_id = %s",
            (window + 1, alice),
        )
    later = await _remember(deps, alice, FACT, key)
    # The call ran again (the text is stored already, so it says so) ...
    assert later != first and later["message"] == "Already remembered"
    # ... and its answer replaced the expired receipt, for its own retries.
    assert await _remember(deps, alice, FACT, key) == later
    with psycopg.connect(dsn) as conn:
        count = conn.execute(
            "SELECT count(*) FROM write_receipts WHERE user_id = %s AND idempotency_key = %s",
            (alice, key),
        ).fetchone()
    assert count == (1,)


async def test_a_redelivered_message_gets_its_own_receipt_whatever_the_window_says(
    deps: Deps, alice: int, dsn: str
) -> None:
    # A queued call carries a window key with its submission (api.mcp.dispatch). A worker that died
    # after committing has the same message redelivered, perhaps after the window, or after
    # a later write named its memory: it must get its own answer back, not write again.
    sent = with_submission(WINDOW_PREFIX + "ana")
    first = await _remember(deps, alice, FACT, sent)
    await _forget(deps, alice, first["memory_id"], with_submission(WINDOW_PREFIX + "f"))
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "UPDATE write_receipts SET created_at = now() - interval '1 day' WHERE user_id = %s",
            (alice,),
        )
    assert await _remember(deps, alice, FACT, sent) == first
    assert await _active(deps, alice, FACT) == []
    # A client's retry is a new submission: judged by the window, it stores again.
    again = await _remember(deps, alice, FACT, with_submission(WINDOW_PREFIX + "ana"))
    assert again["memory_id"] != first["memory_id"]
    assert await _active(deps, alice, FACT) == [again["memory_id"]]


def test_only_window_keys_travel_with_a_submission() -> None:
    sent = with_submission(WINDOW_PREFIX + "abc")
    assert sent.key == WINDOW_PREFIX + "abc" and sent.submission is not None
    assert sent != with_submission(WINDOW_PREFIX + "abc")
    assert with_submission("explicit-op") == IdempotencyKey("explicit-op")


async def test_an_explicit_key_outlives_a_forget(deps: Deps, alice: int, dsn: str) -> None:
    # An explicit key names one operation for as long as receipts are kept.
    first = await _remember(deps, alice, FACT, "explicit-op")
    await _forget(deps, alice, first["memory_id"], WINDOW_PREFIX + "f")
    assert await _remember(deps, alice, FACT, "explicit-op") == first
    assert await _active(deps, alice, FACT) == []


async def test_window_off_never_matches(deps: Deps, alice: int) -> None:
    off = dataclasses.replace(deps, settings=deps.settings.with_overrides(idempotency_window_s=0))
    key = WINDOW_PREFIX + "ana"
    first = await _remember(off, alice, FACT, key)
    assert (await _remember(off, alice, FACT, key))["message"] != first["message"]


def test_idempotency_window_setting(tmp_path: Any) -> None:
    env = {"OWNSONA_DATA_DIR": str(tmp_path)}
    assert Settings.from_env(env).idempotency_window_s == 600
    assert Settings.from_env({**env, "IDEMPOTENCY_WINDOW_S": "0"}).idempotency_window_s == 0
    for bad in ("-1", "86401", "ten"):
        with pytest.raises(SettingsError, match="IDEMPOTENCY_WINDOW_S"):
            Settings.from_env({**env, "IDEMPOTENCY_WINDOW_S": bad})
