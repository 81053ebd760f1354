"""Issue 34, what sits around the memories: a write's stored answer and a recorded query sealed.

Each proof has its control first: the same marker written plain is in the dump. The
console's upload and activity page are proved in tests/console/test_sealed_around.py.
"""

from __future__ import annotations

import dataclasses
import json
import secrets

import psycopg
import pytest

from memory import audit
from memory.call_keys import call_scope
from memory.deps import Deps
from memory.sealing_move import seal_store
from storage.sealing.errors import SealingError
from tests.tool_calls import USE_CASES

from .helpers import call
from .test_sealed_proofs import _dump


async def _retried_write(deps: Deps, user: int, marker: str, key: str) -> tuple[dict, dict]:
    """A write whose answer names the marker (its near duplicate's text), sent twice."""
    await call(deps, user, "remember", text=f"My neighbour {marker} waters the plants on Sundays.")
    args = {"text": f"My neighbour {marker} waters my plants every Sunday.", "dedup_policy": "ask"}
    first = await USE_CASES["remember"](deps, user, args, idempotency_key=key)
    again = await USE_CASES["remember"](deps, user, args, idempotency_key=key)
    return first, again


def _receipt(dsn: str, user: int, key: str) -> tuple[str, bytes | None]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT result::text, result_sealed FROM write_receipts"
            " WHERE user_id = %s AND idempotency_key = %s",
            (user, key),
        ).fetchone()
    assert row is not None
    return row[0], row[1]


def _memories(dsn: str, user: int) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM memories WHERE user_id = %s", (user,)).fetchone()
    assert row is not None
    return int(row[0])


async def test_a_retried_writes_answer_is_sealed_and_replayed_the_same(
    plain_deps: Deps, sealed_deps: Deps, alice: int, bob: int, clean_db: str
) -> None:
    plain_marker = "Plainmarker" + secrets.token_hex(4)
    sealed_marker = "Sealedmarker" + secrets.token_hex(4)
    plain_first, plain_again = await _retried_write(plain_deps, alice, plain_marker, "retry-1")
    sealed_first, sealed_again = await _retried_write(sealed_deps, bob, sealed_marker, "retry-1")
    # The answers carry the marker, and the retry gets the very same one, sealed or plain.
    assert plain_marker in json.dumps(plain_first) and plain_again == plain_first
    assert sealed_marker in json.dumps(sealed_first) and sealed_again == sealed_first
    assert _memories(clean_db, alice) == _memories(clean_db, bob) == 2  # never stored twice
    plain_result, plain_sealed = _receipt(clean_db, alice, "retry-1")
    assert plain_marker in plain_result and plain_sealed is None  # the control
    sealed_result, sealed_value = _receipt(clean_db, bob, "retry-1")
    assert sealed_result == "{}" and sealed_value is not None
    dump = _dump(clean_db).lower()
    assert plain_marker.lower().encode() in dump
    assert sealed_marker.lower().encode() not in dump


async def test_a_receipt_written_before_sealing_still_answers_a_retry(
    plain_deps: Deps, sealed_deps: Deps, alice: int, clean_db: str
) -> None:
    marker = "Beforemarker" + secrets.token_hex(4)
    first, _ = await _retried_write(plain_deps, alice, marker, "retry-2")
    args = {"text": f"My neighbour {marker} waters my plants every Sunday.", "dedup_policy": "ask"}
    again = await USE_CASES["remember"](sealed_deps, alice, args, idempotency_key="retry-2")
    assert again == first and _memories(clean_db, alice) == 2


def _recorded_query(deps: Deps, user: int, query: str) -> audit.AuditLog:
    settings = dataclasses.replace(deps.settings, audit_record_queries=True)
    log = audit.AuditLog(deps.pool, settings, background=False, keyring=deps.keyring)
    log.record(
        user_id=user,
        entry="mcp",
        client_id="test-assistant",
        token_jti=None,
        tool="recall",
        read_only=True,
        arguments={"query": query},
        payload={"ok": True, "matches": []},
        duration_s=0.01,
    )
    return log


async def test_a_recorded_query_is_sealed_and_opens_for_its_owner_only(
    plain_deps: Deps, sealed_deps: Deps, alice: int, bob: int, clean_db: str
) -> None:
    plain_marker = "Plainmarker" + secrets.token_hex(4)
    sealed_marker = "Sealedmarker" + secrets.token_hex(4)
    await call(sealed_deps, bob, "count_memories")  # bob's calls seal: his data key exists
    await _recorded_query(plain_deps, alice, f"where did {plain_marker} go").close()
    await _recorded_query(sealed_deps, bob, f"where did {sealed_marker} go").close()
    dump = _dump(clean_db).lower()
    assert plain_marker.lower().encode() in dump  # the control
    assert sealed_marker.lower().encode() not in dump
    scope = await call_scope(sealed_deps, bob)
    (row,) = await audit.events(sealed_deps.pool, bob, audit.EventFilter(), scope)
    assert row.query == f"where did {sealed_marker} go"
    (plain_row,) = await audit.events(plain_deps.pool, alice, audit.EventFilter())
    assert plain_row.query == f"where did {plain_marker} go"
    # Without keys a sealed query is refused, never shown empty.
    with pytest.raises(SealingError):
        await audit.events(sealed_deps.pool, bob, audit.EventFilter())


async def test_ownsona_seal_moves_receipts_and_recorded_queries(
    plain_deps: Deps, sealed_deps: Deps, alice: int, clean_db: str
) -> None:
    marker = "Movedmarker" + secrets.token_hex(4)
    first, _ = await _retried_write(plain_deps, alice, marker, "retry-3")
    await _recorded_query(plain_deps, alice, f"where did {marker} go").close()
    assert marker.lower().encode() in _dump(clean_db).lower()
    keyring = sealed_deps.keyring
    assert keyring is not None
    await seal_store(sealed_deps.pool, keyring)
    assert marker.lower().encode() not in _dump(clean_db).lower()
    args = {"text": f"My neighbour {marker} waters my plants every Sunday.", "dedup_policy": "ask"}
    again = await USE_CASES["remember"](sealed_deps, alice, args, idempotency_key="retry-3")
    assert again == first
    scope = await call_scope(sealed_deps, alice)
    (row,) = await audit.events(sealed_deps.pool, alice, audit.EventFilter(), scope)
    assert row.query == f"where did {marker} go"
    await seal_store(sealed_deps.pool, keyring)  # a second run changes nothing
    assert _receipt(clean_db, alice, "retry-3")[0] == "{}"
