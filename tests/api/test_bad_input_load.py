"""Ten thousand bad tool calls over /mcp against the real use cases: all refused, nothing changed.

A seeded generator (deterministic, fast) builds each call from the tool's
own ``inputSchema`` (read from tools/list at run time) and breaks it at
least once in a way the tools chapter and SUPPLEMENT §7 make an error: an
argument the schema does not name, a required argument left out, a value of
a JSON type the schema does not allow, a lone surrogate in a string. On top
of that it piles softer abuse (out-of-range numbers, huge strings, negative
ids, bad timestamps, deep nesting). Every answer must be a JSON-RPC response
with no HTTP 500, every tool result must be a refusal (``isError``) other
than INTERNAL_ERROR, an unknown argument must be INVALID_INPUT, and the
store (every row of every table) must be the same before and after.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

import falcon.testing
import psycopg
import pytest

from api.app import create_app
from api.runtime import Runtime
from config.settings import Settings
from memory.deps import Deps
from tests.api.conftest import PUBLIC_URL, Mcp
from tests.api.test_service_roundtrip import InlineWriteQueue

REQUESTS = 10_000
SEED = 20261201
#: Lone surrogates (and a reversed pair), which JSON can escape but Unicode cannot hold.
LONE_SURROGATES = ["\ud800", "\udfff", "a\udc00b", "\udbff", "\ude00\ud83d"]
BAD_TIMESTAMPS = ["yesterday", "2026-13-40T25:61:00Z", "", "0000-00-00", "9" * 40, "2026-02-30"]
#: Tables whose rows a refused request could not touch and that reads may legitimately write.
#: audit_events records every call, refused ones too (that is its job): it is checked
#: apart, for holding no text of the bad calls (tests/console/test_audit_log.py).
UNWATCHED_TABLES = frozenset({"schema_migrations", "audit_events"})


@pytest.fixture
def api_settings() -> Settings:
    # A body cap large enough for the huge strings, which must reach the tools.
    return Settings(public_url=PUBLIC_URL, max_body_bytes=2_000_000, max_batch_size=5)


@pytest.fixture
async def real_mcp(api_settings: Settings, pool: Any, embedder: Any, runtime: Runtime, token: str):
    deps = Deps(settings=api_settings, pool=pool, embedder=embedder)
    real = Runtime(api_settings, deps, InlineWriteQueue(deps), runtime.keystore, runtime.bearer)
    async with falcon.testing.ASGIConductor(create_app(api_settings, runtime=real)) as conductor:
        yield Mcp(conductor, token)


def _snapshot(dsn: str) -> dict[str, list[str]]:
    """Every row of every table of ours, as sorted JSON text."""
    with psycopg.connect(dsn) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
            )
        ]
        return {
            table: sorted(
                row[0]
                for row in conn.execute(f'SELECT to_jsonb(t)::text FROM "{table}" t')  # noqa: S608
            )
            for table in tables
            if table not in UNWATCHED_TABLES
        }


# --- the generator -----------------------------------------------------------------

JSON_SAMPLES: list[Any] = [None, True, False, 0, -1, 1.5, "x", [], {}, [1, "a"], {"k": "v"}]


def _types_of(value: Any) -> set[str]:
    if value is None:
        return {"null"}
    if isinstance(value, bool):
        return {"boolean"}
    if isinstance(value, int):
        return {"integer", "number"}
    if isinstance(value, float):
        return {"number"}
    if isinstance(value, str):
        return {"string"}
    if isinstance(value, list):
        return {"array"}
    return {"object"}


def _allowed(schema: dict[str, Any]) -> set[str] | None:
    kind = schema.get("type")
    if kind is None:
        return None
    return set(kind) if isinstance(kind, list) else {kind}


def _plausible(rng: random.Random, schema: dict[str, Any]) -> Any:
    """A value of the schema's type, sometimes in range, sometimes not."""
    allowed = _allowed(schema) or {"string"}
    kind = rng.choice(sorted(allowed - {"null"}) or ["null"])
    if kind == "string":
        if schema.get("format") == "date-time" and rng.random() < 0.5:
            return rng.choice(["2026-01-01T00:00:00Z", "1970-01-01T00:00:00+00:00"])
        return rng.choice(["my son lives in LA", "a", "x" * rng.randint(0, 40), "ünï 😀"])
    if kind == "integer":
        return rng.choice([1, 2, 3, 10, 50, 7])
    if kind == "number":
        return rng.choice([0, 0.5, 1, 0.25])
    if kind == "boolean":
        return rng.choice([True, False])
    if kind == "array":
        item = schema.get("items") or {}
        return [_plausible(rng, item) for _ in range(rng.randint(0, 3))]
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: _plausible(rng, v) for k, v in props.items() if rng.random() < 0.7}
    return None


def _soft_abuse(rng: random.Random, schema: dict[str, Any]) -> Any:
    """Out of range, huge, negative, badly formatted, deep: wrong in value, not in type."""
    allowed = _allowed(schema) or set()
    if "string" in allowed:
        if schema.get("format") == "date-time":
            return rng.choice(BAD_TIMESTAMPS)
        return rng.choice(["x" * 20_000, "\x00", "🙂" * 5000, " ", "\u202e\ufeff"])
    if "integer" in allowed:
        return rng.choice([-1, 0, -(2**63), 2**63, 2**200, 10**4000])
    if "number" in allowed:
        return rng.choice([-1e308, 1e308, -0.0001, 1.0001, 2**70])
    if "array" in allowed:
        return rng.choice([[None] * 500, [[[[[]]]]], list(range(-5, 0)), [{"deep": [[[]]]}]])
    return _plausible(rng, schema)


def _wrong_type(rng: random.Random, schema: dict[str, Any], required: bool) -> tuple[bool, Any]:
    allowed = _allowed(schema)
    if allowed is None:
        return False, None
    wrong = [v for v in JSON_SAMPLES if not (_types_of(v) & allowed)]
    if not required:
        # null for an optional argument may mean "not given"; not a sure violation.
        wrong = [v for v in wrong if v is not None]
    if "number" in allowed or "integer" in allowed:
        wrong = [v for v in wrong if not isinstance(v, (int, float)) or isinstance(v, bool)]
    if "integer" in allowed and "number" not in allowed:
        wrong.append(2.5)
    return (True, rng.choice(wrong)) if wrong else (False, None)


def _bad_call(rng: random.Random, tool: dict[str, Any]) -> tuple[Any, set[str]]:
    """Arguments for ``tool`` broken at least once; the set names the sure violations."""
    schema = tool["inputSchema"]
    props: dict[str, Any] = schema.get("properties") or {}
    required: list[str] = schema.get("required") or []
    args: dict[str, Any] = {k: _plausible(rng, props[k]) for k in required}
    for name, prop in props.items():
        if name not in args and rng.random() < 0.4:
            args[name] = _plausible(rng, prop)
    for name in list(args):
        if rng.random() < 0.2:
            args[name] = _soft_abuse(rng, props[name])

    broken: set[str] = set()
    while not broken:
        choice = rng.choice(["unknown", "missing", "type", "surrogate", "surrogate-key"])
        if choice == "unknown":
            key = rng.choice(
                ["zz", "Text", "ID", "__proto__", "limit ", "", "arguments", "ünknown"]
            )
            if key not in props:
                args[key] = rng.choice(JSON_SAMPLES)
                broken.add("unknown")
        elif choice == "missing" and required:
            args.pop(rng.choice(required), None)
            broken.add("missing")
        elif choice == "type" and props:
            name = rng.choice(sorted(props))
            ok, value = _wrong_type(rng, props[name], name in required)
            if ok:
                args[name] = value
                broken.add("type")
        elif choice == "surrogate":
            strings = [k for k, p in props.items() if "string" in (_allowed(p) or set())]
            if strings:
                args[rng.choice(strings)] = rng.choice(LONE_SURROGATES)
                broken.add("surrogate")
        elif choice == "surrogate-key":
            args[rng.choice(LONE_SURROGATES)] = "x"
            broken.add("unknown")
    return args, broken


def _body(request_id: int, name: str, arguments: Any) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    # ensure_ascii: a lone surrogate goes out as its \u escape, as a client would send it.
    return json.dumps(message, ensure_ascii=True).encode()


# --- the test ----------------------------------------------------------------------


async def test_ten_thousand_bad_tool_calls_are_refused_and_change_nothing(
    real_mcp: Mcp, clean_db: str
) -> None:
    stored = await real_mcp.call_tool("remember", {"text": "My son Colby lives in Los Angeles."})
    assert stored["isError"] is False, stored
    listing = await real_mcp.request("tools/list")
    tools = listing.json["result"]["tools"]
    assert len(tools) >= 20
    before = _snapshot(clean_db)

    rng = random.Random(SEED)
    problems: list[str] = []
    counts: dict[str, int] = {}
    started = time.monotonic()
    for request_id in range(1, REQUESTS + 1):
        tool = rng.choice(tools)
        arguments, broken = _bad_call(rng, tool)
        answer = await real_mcp.post(_body(request_id, tool["name"], arguments))
        counts[tool["name"]] = counts.get(tool["name"], 0) + 1
        where = f"#{request_id} {tool['name']} {sorted(broken)} {repr(arguments)[:160]}"
        if answer.status_code != 200:
            problems.append(f"{where}: HTTP {answer.status_code} {answer.text[:200]}")
            continue
        body = json.loads(answer.content)
        if body.get("jsonrpc") != "2.0" or body.get("id") != request_id:
            problems.append(f"{where}: not a JSON-RPC response {answer.text[:200]}")
            continue
        result = body.get("result")
        if result is None:
            problems.append(f"{where}: JSON-RPC error {body.get('error')}")
            continue
        error = result["structuredContent"].get("error") or {}
        if result["isError"] is not True:
            problems.append(f"{where}: accepted")
        elif error.get("code") == "INTERNAL_ERROR":
            problems.append(f"{where}: INTERNAL_ERROR")
        elif "unknown" in broken and error.get("code") != "INVALID_INPUT":
            problems.append(f"{where}: an unknown argument gave {error.get('code')}")
        if len(problems) >= 20:
            break
    elapsed = time.monotonic() - started

    assert not problems, "\n".join(problems)
    assert set(counts) == {tool["name"] for tool in tools}  # every tool was exercised
    assert _snapshot(clean_db) == before
    assert elapsed < 120, f"{REQUESTS} requests took {elapsed:.0f} s"
