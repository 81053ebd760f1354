"""Shared helpers for the service-level tests (the functions the MCP tools call)."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from memory.errors import MemoryServiceError
from tests.tool_calls import USE_CASES

#: RFC 3339 in UTC with "Z" (SUPPLEMENT §2: timestamps out).
RFC3339_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$")

#: Keys that would betray a vector leaking out of a payload.
_VECTOR_KEYS = {"embedding", "context_centroid", "vector", "embeddings"}

#: Output fields of a recall match (the chapter's example), with their JSON types.
MATCH_FIELDS: dict[str, tuple[type, ...]] = {
    "id": (int,),
    "text": (str,),
    "created_at": (str,),
    "updated_at": (str,),
    "last_confirmed_at": (str, type(None)),
    "tags": (list,),
    "source_provider": (str, type(None)),
    "capture_mode": (str, type(None)),
    "salience": (float, int),
    "use_count": (int,),
    "keep": (bool,),
}

#: Output fields of get_memory's ``memory`` (the chapter's example), with types.
FULL_FIELDS: dict[str, tuple[type, ...]] = {
    "id": (int,),
    "text": (str,),
    "tags": (list,),
    "importance": (float, int),
    "created_at": (str,),
    "updated_at": (str,),
    "deleted_at": (str, type(None)),
    "forget_reason": (str, type(None)),
    "replaced_by_id": (int, type(None)),
    "last_confirmed_at": (str, type(None)),
    "expires_at": (str, type(None)),
    "occurred_at": (str, type(None)),
    "valid_from": (str, type(None)),
    "valid_to": (str, type(None)),
    "source_provider": (str, type(None)),
    "keep": (bool,),
}

_TIMESTAMP_KEYS = {
    "created_at",
    "updated_at",
    "last_confirmed_at",
    "expires_at",
    "occurred_at",
    "valid_from",
    "valid_to",
    "deleted_at",
    "oldest_created_at",
    "newest_created_at",
}


async def call(deps: Any, user: int, tool: str, **args: Any) -> dict[str, Any]:
    """Call a use case the way the MCP layer does, and check the payload's hygiene."""
    payload = await USE_CASES[tool](deps, user, args)
    check_payload(payload)
    return payload


async def call_raw(deps: Any, user: int, tool: str, args: Any) -> dict[str, Any]:
    payload = await USE_CASES[tool](deps, user, args)
    check_payload(payload)
    return payload


async def fails(deps: Any, user: int, tool: str, code: str, **args: Any) -> MemoryServiceError:
    """Call a use case that must fail with ``code``; return the error."""
    try:
        payload = await USE_CASES[tool](deps, user, args)
    except MemoryServiceError as ex:
        assert ex.code == code, (
            f"{tool}({args!r}) failed with {ex.code} ({ex.message}), expected {code}"
        )
        assert isinstance(ex.message, str) and ex.message
        check_payload(ex.to_payload())
        return ex
    raise AssertionError(f"{tool}({args!r}) succeeded, expected {code}: {payload!r}")


def check_payload(payload: Any) -> None:
    """Every payload: a JSON object with "ok", JSON-clean, no vectors, timestamps RFC 3339 Z."""
    assert isinstance(payload, dict)
    assert "ok" in payload and isinstance(payload["ok"], bool)
    assert json.loads(json.dumps(payload, allow_nan=False)) == payload, "payload is not plain JSON"
    assert_no_vectors(payload)
    assert_timestamps(payload)


def assert_no_vectors(value: Any, path: str = "$") -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            assert k not in _VECTOR_KEYS, f"vector-like key {k!r} at {path}"
            assert_no_vectors(v, f"{path}.{k}")
    elif isinstance(value, list):
        numbers = [v for v in value if isinstance(v, float)]
        assert len(numbers) < 16, f"a list of {len(numbers)} floats (a vector?) at {path}"
        for i, v in enumerate(value):
            assert_no_vectors(v, f"{path}[{i}]")
    else:
        assert not isinstance(value, np.ndarray), f"numpy array at {path}"


def assert_timestamps(value: Any, path: str = "$") -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            if k in _TIMESTAMP_KEYS and v is not None:
                assert isinstance(v, str) and RFC3339_Z.match(v), (
                    f"{path}.{k} = {v!r} is not RFC 3339 Z"
                )
            assert_timestamps(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            assert_timestamps(v, f"{path}[{i}]")


def assert_fields(obj: dict[str, Any], fields: dict[str, tuple[type, ...]]) -> None:
    for name, types in fields.items():
        assert name in obj, f"missing field {name!r} in {obj!r}"
        value = obj[name]
        if bool not in types:
            assert not isinstance(value, bool), f"{name} is a bool"
        assert isinstance(value, types), f"{name} = {value!r} is not {types}"


# --- direct database access (to arrange states the tools cannot reach) -------------


async def sql(deps: Any, query: str, params: Any = ()) -> list[tuple[Any, ...]]:
    async with deps.pool.connection() as conn:
        cur = await conn.execute(query, params)
        rows = await cur.fetchall() if cur.description else []
    return rows


async def stored_edges(deps: Any, memory_ids: list[int]) -> list[tuple[str, str, str]]:
    """The memories' relation edges as stored, by id; a sealed edge's phrases opened with
    its user's keys (storage.sealed_relations), so a test reads the same either way."""
    from storage.sealed_relations import PHRASE_COLUMNS

    rows = await sql(
        deps,
        "SELECT id, user_id, subject, predicate, object,"
        " subject_sealed, predicate_sealed, object_sealed"
        " FROM memory_relations WHERE memory_id = ANY(%s) ORDER BY id",
        (memory_ids,),
    )
    out = []
    for edge_id, user_id, subject, predicate, obj, *sealed in rows:
        if sealed[0] is None:
            out.append((subject, predicate, obj))
            continue
        keys = await deps.keyring.user_keys(user_id)
        s, p, o = (keys.open(v, edge_id, c) for v, c in zip(sealed, PHRASE_COLUMNS, strict=True))
        out.append((s, p, o))
    return out


async def expire(deps: Any, memory_id: int) -> None:
    """Make a row expired (expires_at in the past) without going through the tools."""
    await sql(
        deps,
        "UPDATE memories SET expires_at = now() - interval '1 minute' WHERE id = %s",
        (memory_id,),
    )


async def row_count(deps: Any, user: int | None = None) -> int:
    """Every row, deleted or not, of one user (or of everyone)."""
    if user is None:
        rows = await sql(deps, "SELECT count(*) FROM memories")
    else:
        rows = await sql(deps, "SELECT count(*) FROM memories WHERE user_id = %s", (user,))
    return int(rows[0][0])


async def fingerprint(deps: Any, user: int) -> tuple[int, str]:
    """A digest of every column of every row of the user's: equal means nothing changed."""
    rows = await sql(
        deps,
        """
        SELECT count(*), coalesce(md5(string_agg(concat_ws('|', id, text, normalized_text,
               tags::text, importance, keep, source_provider, capture_mode, session_id,
               created_at, updated_at, last_confirmed_at, expires_at, occurred_at, valid_from,
               valid_to, occurred_at_parsed, deleted_at,
               forget_reason, replaced_by_id, salience, use_count, context_count,
               md5(embedding::text), md5(text_sealed), md5(tags_sealed), sealed_search::text,
               text_chars), ',' ORDER BY id)), '')
        FROM memories WHERE user_id = %s
        """,
        (user,),
    )
    return int(rows[0][0]), str(rows[0][1])


async def cosine(deps: Any, a: str, b: str) -> float:
    va, vb = await deps.embedder.embed([a, b])
    return float(np.dot(va, vb))


async def remember_many(deps: Any, user: int, texts: list[str], **item_args: Any) -> list[int]:
    """Store texts with one remember_batch (dedup off) and return their ids in order."""
    out = await call(
        deps,
        user,
        "remember_batch",
        items=[{"text": t, **item_args} for t in texts],
        dedup_policy="insert",
    )
    assert out["summary"]["failed"] == 0, out
    return [r["memory_id"] for r in out["results"]]


async def get(deps: Any, user: int, memory_id: int) -> dict[str, Any]:
    return (await call(deps, user, "get_memory", id=memory_id))["memory"]


async def opened_rows(deps: Any, query: str, params: Any = ()) -> list[dict[str, Any]]:
    """The rows of ``query`` as dicts, ``text`` and ``tags`` opened where a row is sealed.

    Through the product's own reader (``storage.sealed_rows.opened``) with the keys of
    each row's user from ``deps.keyring``: what a tool would show, sealed or plain.
    ``query`` selects ``id``, ``user_id``, ``text_sealed`` and ``tags_sealed`` beside
    what the test reads.
    """
    from psycopg.rows import dict_row

    from storage.sealed_rows import opened
    from storage.sealing.scope import Scope, sealing_as

    async with deps.pool.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(query, params)
        rows = await cur.fetchall()
    owners = {r["user_id"] for r in rows if r["text_sealed"] is not None}
    readable = {}
    if owners:
        assert deps.keyring is not None, "sealed rows, and no keyring to open them"
        readable = {u: await deps.keyring.user_keys(u, create=False) for u in owners}
    with sealing_as(Scope(None, seal_writes=False, readable=readable)):
        return [dict(opened(r)) for r in rows]


async def named_terms(deps: Any, user: int, lexemes: Any) -> dict[str, str]:
    """``{stored term: lexeme}`` for these lexemes, as the product stores them for ``user``
    in this deployment (``storage.sealed_rows.query_terms`` in the user's call scope):
    the lexemes themselves when plain, their keyed hashes when sealed."""
    from memory.call_keys import call_scope
    from storage.sealed_rows import query_terms
    from storage.sealing.scope import sealing_as

    with sealing_as(await call_scope(deps, user)):
        return query_terms(user, list(lexemes))
