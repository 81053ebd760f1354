"""Unknown arguments over /mcp: INVALID_INPUT naming the field, nothing changed, nothing queued.

Every tool's inputSchema says ``additionalProperties: false``; the server
holds to it (issue 12). The use cases are the real ones over PostgreSQL; the
write queue runs them in-process and counts what reaches it, so a refused
call can be shown never to have been queued.
"""

from __future__ import annotations

from typing import Any

import falcon.testing
import pytest

from api.app import create_app
from api.mcp.tools import tool_specs
from api.runtime import Runtime
from config.settings import Settings
from memory.deps import Deps
from tests.api.conftest import Mcp, open_session
from tests.service.helpers import fingerprint
from tests.tool_calls import InlineWriteQueue
from tests.tool_samples import misspelt

CountingWriteQueue = InlineWriteQueue


@pytest.fixture
def deps(api_settings: Settings, pool: Any, embedder: Any) -> Deps:
    return Deps(settings=api_settings, pool=pool, embedder=embedder)


@pytest.fixture
def queue(deps: Deps) -> CountingWriteQueue:
    return CountingWriteQueue(deps)


@pytest.fixture
async def real_mcp(
    api_settings: Settings, deps: Deps, queue: CountingWriteQueue, runtime: Runtime, token: str
):
    real = Runtime(api_settings, deps, queue, runtime.keystore, runtime.bearer)
    async with falcon.testing.ASGIConductor(create_app(api_settings, runtime=real)) as conductor:
        yield Mcp(conductor, token)


@pytest.fixture
async def seeded(real_mcp: Mcp, queue: CountingWriteQueue) -> int:
    """One stored memory for the destructive tools to (not) touch; the queue starts empty."""
    stored = await real_mcp.call_tool(
        "remember", {"text": "I have a cat named Tom.", "tags": ["pets"]}
    )
    assert stored["isError"] is False, stored
    queue.submitted.clear()
    return int(stored["structuredContent"]["memory_id"])


#: Every tool of the registry (names only: the api fixtures' settings change no name).
TOOLS = list(tool_specs(Settings()))


def _cases(n: int) -> dict[str, tuple[dict[str, Any], str, str | None]]:
    """Misspellings a model makes, hand-picked: otherwise valid arguments, the misspelt
    field among them, the suggestion. A tool without one gets its schema's own
    (``tests.tool_samples.misspelt``)."""
    return {
        "remember": ({"text": "Kites fly best in spring.", "tagz": ["kites"]}, "tagz", "tags"),
        "remember_batch": (
            {"items": [{"text": "Kites fly best in spring."}], "dedupPolicy": "insert"},
            "dedupPolicy",
            "dedup_policy",
        ),
        "recall": ({"query": "cat", "limt": 3}, "limt", "limit"),
        "search_memory": ({"query": "cat", "limt": 3}, "limt", "limit"),
        "build_context_prompt": (
            {"user_prompt": "My cat?", "max_char": 500},
            "max_char",
            "max_chars",
        ),
        "list_memories": ({"offest": 0}, "offest", "offset"),
        "update_memory": ({"id": n, "importance": 0.9, "dryRun": True}, "dryRun", "dry_run"),
        "update_memory_batch": (
            {"items": [{"id": n, "importance": 0.9}], "dry_rn": True},
            "dry_rn",
            "dry_run",
        ),
        "confirm": ({"id": n, "memory_id": n}, "memory_id", None),
        "forget": ({"id": n, "dryRun": True}, "dryRun", "dry_run"),
        "forget_batch": ({"ids": [n], "reasn": "cleanup"}, "reasn", "reason"),
        "text_search": ({"text": "cat", "limits": 5}, "limits", "limit"),
        "get_memory": ({"id": n, "with_text": True}, "with_text", None),
        "count_memories": ({"tag": ["pets"]}, "tag", "tags"),
        "memory_stats": ({"verbose": True}, "verbose", None),
        "list_tags": ({"includeDeleted": True}, "includeDeleted", "include_deleted"),
        "export_memories": ({"include_deletd": False}, "include_deletd", "include_deleted"),
        "reinforce": ({"memory_ids": [n], "delt": 1}, "delt", "delta"),
        "find_near_duplicates": ({"treshold": 0.9}, "treshold", "threshold"),
        "find_conflicts": ({"max_group": 5}, "max_group", "max_groups"),
        "query_relations": ({"entity": "me", "hops": 2}, "hops", "max_hops"),
    }


def test_the_hand_picked_cases_name_registered_tools(api_settings: Settings) -> None:
    assert set(_cases(1)) <= set(tool_specs(api_settings)) == set(TOOLS)


@pytest.mark.parametrize("tool", TOOLS)
async def test_an_unknown_argument_is_refused_and_changes_nothing(
    real_mcp: Mcp,
    deps: Deps,
    queue: CountingWriteQueue,
    user_id: int,
    seeded: int,
    tool: str,
    api_settings: Settings,
) -> None:
    case = _cases(seeded).get(tool) or misspelt(tool_specs(api_settings)[tool], seeded)
    args, field, suggestion = case
    before = await fingerprint(deps, user_id)
    session = await open_session(real_mcp)
    result = await real_mcp.call_tool(tool, args, mcp_session_id=session)
    assert result["isError"] is True, result
    error = result["structuredContent"]["error"]
    assert error["code"] == "INVALID_INPUT"
    assert error["detail"]["field"] == field
    assert field in error["message"]
    if suggestion is None:
        assert "suggestion" not in error["detail"]
    else:
        assert error["detail"]["suggestion"] == suggestion
        assert error["message"].endswith(f"did you mean {suggestion}?")
    assert await fingerprint(deps, user_id) == before
    # Refused in the API process: a queued tool's bad call never reached the queue.
    assert queue.submitted == []


async def test_forget_with_dryrun_is_not_a_forget(
    real_mcp: Mcp, deps: Deps, queue: CountingWriteQueue, user_id: int, seeded: int
) -> None:
    before = await fingerprint(deps, user_id)
    result = await real_mcp.call_tool("forget", {"id": seeded, "dryRun": True})
    assert result["isError"] is True
    assert result["structuredContent"] == {
        "ok": False,
        "error": {
            "code": "INVALID_INPUT",
            "message": "Unknown field 'dryRun'; did you mean dry_run?",
            "detail": {"field": "dryRun", "suggestion": "dry_run"},
        },
    }
    assert await fingerprint(deps, user_id) == before
    assert queue.submitted == []
    fetched = await real_mcp.call_tool("get_memory", {"id": seeded})
    assert fetched["structuredContent"]["memory"]["deleted_at"] is None


async def test_a_tool_without_arguments_says_so(real_mcp: Mcp) -> None:
    result = await real_mcp.call_tool("memory_stats", {"verbose": True})
    error = result["structuredContent"]["error"]
    assert error["message"] == "Unknown field 'verbose'; this tool takes no arguments."


async def test_a_far_off_name_lists_the_known_fields(real_mcp: Mcp, seeded: int) -> None:
    result = await real_mcp.call_tool("get_memory", {"id": seeded, "with_text": True})
    assert result["structuredContent"]["error"]["message"] == (
        "Unknown field 'with_text'; known fields: id."
    )


async def test_a_long_unknown_name_is_cut_short_in_the_answer(real_mcp: Mcp) -> None:
    name = "q" * 500
    result = await real_mcp.call_tool("list_tags", {name: 1})
    error = result["structuredContent"]["error"]
    assert error["detail"]["field"] == "q" * 60 + "..."
    assert len(error["message"]) < 200


@pytest.mark.parametrize(
    ("tool", "items", "bad_field"),
    [
        (
            "remember_batch",
            [
                {"text": "Tea is best at 80 degrees."},
                {"text": "Kites fly in spring.", "tagz": ["kites"]},
                {"text": "The bus leaves at seven."},
            ],
            "tagz",
        ),
        (
            "update_memory_batch",
            [
                {"id": "SEED", "importance": 0.9},
                {"id": "SEED", "tags": ["cats"], "imp": 0.1},
                {"id": "SEED", "tags": ["home"]},
            ],
            "imp",
        ),
    ],
)
async def test_an_unknown_field_in_a_batch_item_fails_that_item_only(
    real_mcp: Mcp,
    deps: Deps,
    queue: CountingWriteQueue,
    user_id: int,
    seeded: int,
    tool: str,
    items: list[dict[str, Any]],
    bad_field: str,
) -> None:
    items = [{k: (seeded if v == "SEED" else v) for k, v in item.items()} for item in items]
    result = await real_mcp.call_tool(tool, {"items": items})
    assert result["isError"] is False, result
    results = result["structuredContent"]["results"]
    assert [r["ok"] for r in results] == [True, False, True]
    assert results[1]["error"]["code"] == "INVALID_INPUT"
    assert results[1]["error"]["detail"]["field"] == bad_field
    assert queue.submitted == [tool]  # the batch itself is fine: it is queued once
    count, _ = await fingerprint(deps, user_id)
    if tool == "remember_batch":
        assert count == 3
        found = await real_mcp.call_tool("text_search", {"text": "Kites"})
        assert found["structuredContent"]["memories"] == []
    else:
        memory = (await real_mcp.call_tool("get_memory", {"id": seeded}))["structuredContent"][
            "memory"
        ]
        assert memory["importance"] == 0.9 and memory["tags"] == ["home"]


@pytest.mark.parametrize("tool", ["find_near_duplicates", "find_conflicts"])
async def test_max_groups_over_the_hard_cap_is_invalid(real_mcp: Mcp, tool: str) -> None:
    result = await real_mcp.call_tool(tool, {"max_groups": 501})
    error = result["structuredContent"]["error"]
    assert error["code"] == "INVALID_INPUT" and error["detail"] == {"field": "max_groups"}
    assert (await real_mcp.call_tool(tool, {"max_groups": 500}))["isError"] is False


@pytest.mark.parametrize(
    "args",
    [{"supersedes": [0]}, {"supersedes": [-3]}, {"downweights": [0]}],
)
async def test_ids_below_one_are_invalid_and_nothing_is_stored(
    real_mcp: Mcp, deps: Deps, user_id: int, seeded: int, args: dict[str, Any]
) -> None:
    before = await fingerprint(deps, user_id)
    result = await real_mcp.call_tool("remember", {"text": "Kites fly in spring.", **args})
    error = result["structuredContent"]["error"]
    assert error["code"] == "INVALID_INPUT" and error["detail"] == {"field": next(iter(args))}
    assert await fingerprint(deps, user_id) == before


#: Every tool argument that takes a timestamp, with the rest of a valid call.
TIMESTAMP_FIELDS = [
    ("remember", {"text": "Kites fly in spring."}, "expires_at", "2099-01-01T00:00:00Z"),
    ("remember", {"text": "Kites fly in spring."}, "last_confirmed_at", "2026-01-01T00:00:00Z"),
    ("update_memory", {"id": "SEED"}, "expires_at", "2099-01-01T00:00:00Z"),
    ("update_memory", {"id": "SEED"}, "last_confirmed_at", "2026-01-01T00:00:00Z"),
    # Event time (issue 17).
    ("remember", {"text": "Kites flew on the beach."}, "occurred_at", "2023-05-07T10:00:00Z"),
    ("remember", {"text": "Kites flew on the beach."}, "valid_from", "2023-05-07T10:00:00Z"),
    ("remember", {"text": "Kites flew on the beach."}, "valid_to", "2023-05-07T10:00:00Z"),
    ("remember", {"text": "Kites flew last week."}, "reference_time", "2023-05-07T10:00:00Z"),
    ("update_memory", {"id": "SEED"}, "occurred_at", "2023-05-07T10:00:00Z"),
    ("update_memory", {"id": "SEED"}, "valid_from", "2023-05-07T10:00:00Z"),
    ("update_memory", {"id": "SEED"}, "valid_to", "2023-05-07T10:00:00Z"),
    ("list_memories", {}, "not_confirmed_since", "2026-01-01T00:00:00Z"),
    ("count_memories", {}, "not_confirmed_since", "2026-01-01T00:00:00Z"),
]


def test_the_timestamp_table_covers_every_timestamp_argument(api_settings: Settings) -> None:
    declared = {
        (spec.name, name)
        for spec in tool_specs(api_settings).values()
        for name, prop in spec.input_schema["properties"].items()
        if prop.get("format") == "date-time"
    }
    assert declared == {(tool, field) for tool, _, field, _ in TIMESTAMP_FIELDS}


@pytest.mark.parametrize(("tool", "base", "field", "good"), TIMESTAMP_FIELDS)
@pytest.mark.parametrize("pad", ["lead", "trail"])
async def test_a_timestamp_with_surrounding_spaces_is_malformed(
    real_mcp: Mcp,
    deps: Deps,
    user_id: int,
    seeded: int,
    tool: str,
    base: dict[str, Any],
    field: str,
    good: str,
    pad: str,
) -> None:
    args = {k: (seeded if v == "SEED" else v) for k, v in base.items()}
    before = await fingerprint(deps, user_id)
    padded = f" {good}" if pad == "lead" else f"{good} "
    result = await real_mcp.call_tool(tool, {**args, field: padded})
    error = result["structuredContent"]["error"]
    assert error["code"] == "INVALID_INPUT" and error["detail"] == {"field": field}
    assert await fingerprint(deps, user_id) == before
    # The same instant without the spaces is accepted.
    assert (await real_mcp.call_tool(tool, {**args, field: good}))["isError"] is False
