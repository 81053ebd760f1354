"""docs/adding-a-tool.md, walked through: a throwaway read tool in a registry of its own.

The tool is declared as the recipe says (a command, its handler declared with
``@handles``, one ``ToolSpec``), in a copy of the handlers and an extra family,
so nothing of the process's registry changes. Then: it is listed with its
title and read-only hints, within the listing budget; its calls are validated
(a bad value and an unknown name answered INVALID_INPUT, as the chapter's
"Error codes" says) and run inline; its command is routed to a replica; and
the recipe names every step this needed. The startup check is shown to refuse
each disagreement it promises to.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from api.mcp import tool_outputs as out
from api.mcp.dispatch import CallContext, McpDispatcher
from api.mcp.jsonrpc import Message
from api.mcp.tool_schemas import Schemas
from api.mcp.tool_spec import ToolSpec
from api.mcp.tools import FAMILIES, RegistryError, tool_specs
from bootstrap.read_routing import routed_runner
from config.settings import Settings
from memory.calls import CallMeta
from memory.commands import REGISTERED, Command
from memory.commands.codec import command
from memory.commands.handling import Handlers
from memory.deps import Deps
from memory.handlers import HANDLING
from memory.rules.inputs import Args
from tests.api.test_tools_size import PER_TOOL, tool_cost
from tests.tool_samples import bad_arguments, misspelt, sample_arguments

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "docs" / "adding-a-tool.md"
NAME = "throwaway_timeline"


@dataclass(frozen=True)
class ThrowawayTimeline(Command):
    """Step 3: the command (registered with ``@command`` by the fixture, and removed after)."""

    months: int

    @classmethod
    def parse(cls, raw: object, settings: Settings) -> ThrowawayTimeline:
        months = Args(raw).integer("months", default=12, minimum=1, maximum=60)
        assert months is not None
        return cls(months)


async def throwaway_timeline(
    deps: Deps, meta: CallMeta, command: ThrowawayTimeline
) -> dict[str, Any]:
    """Step 4: the handler (it reads nothing: which pool it was given is its answer)."""
    return {"ok": True, "months": [], "pool": str(deps.pool)}


def throwaway_tools(s: Schemas) -> list[ToolSpec]:
    """Step 5: the one declaration, in a family of its own."""
    return [
        ToolSpec(
            name=NAME,
            title="Timeline",
            description="Active memories created per month, newest month first.",
            input_schema=s.obj(
                {"months": {"type": "integer", "minimum": 1, "maximum": 60, "default": 12}}
            ),
            output_schema=out.result(months=out.keys("month", "count")),
            command=ThrowawayTimeline,
            queued=False,
        )
    ]


@pytest.fixture
def handlers() -> Iterator[Handlers]:
    """The process's handlers and the throwaway's, in a registry of their own."""
    command(ThrowawayTimeline)
    registry = HANDLING.copy()
    registry.handles(ThrowawayTimeline, reads=True)(throwaway_timeline)
    yield registry
    # @command registers in the queue's table of command types: leave it as it was.
    del REGISTERED[ThrowawayTimeline.type_name()]


@pytest.fixture
def specs(handlers: Handlers) -> dict[str, ToolSpec]:
    return tool_specs(Settings(), (*FAMILIES, throwaway_tools), handlers)


class Replicas:
    """A replica set of one healthy replica: the routing's view of ``storage.replicas``."""

    primary = "primary"
    replica = "replica"

    async def pool_for_read(self, user_id: int) -> str:
        return self.replica

    def mark_down(self, pool: Any) -> None:
        raise AssertionError("the replica did not fail")

    def went_down(self, pool: Any) -> asyncio.Event:
        return asyncio.Event()  # never set: the replica stays up


def _dispatcher(specs: dict[str, ToolSpec], handlers: Handlers) -> McpDispatcher:
    async def run_inline(deps: Deps, meta: CallMeta, cmd: Command) -> dict[str, Any]:
        return await handlers.of(type(cmd)).handler(deps, meta, cmd)

    deps = Deps(settings=Settings(), pool="primary", embedder=None)  # type: ignore[arg-type]
    return McpDispatcher(specs, run_inline, deps=deps, write_queue=None)  # type: ignore[arg-type]


async def _request(dispatcher: McpDispatcher, method: str, params: dict[str, Any]) -> Any:
    outcome = await dispatcher.handle(
        Message("request", id=1, method=method, params=params), CallContext(user_id=7)
    )
    return outcome.response["result"]


async def test_the_throwaway_tool_is_listed_read_only_within_budget(
    specs: dict[str, ToolSpec], handlers: Handlers
) -> None:
    listed = (await _request(_dispatcher(specs, handlers), "tools/list", {}))["tools"]
    assert [t["name"] for t in listed] == [*tool_specs(Settings()), NAME]
    tool = listed[-1]
    assert tool["annotations"] == {
        "title": "Timeline",
        "readOnlyHint": True,
        "openWorldHint": False,
    }
    assert tool_cost(tool) <= PER_TOOL
    # The process's own registry is untouched.
    assert NAME not in tool_specs(Settings())


async def test_the_throwaway_tool_is_validated_and_runs_inline(
    specs: dict[str, ToolSpec], handlers: Handlers
) -> None:
    dispatcher = _dispatcher(specs, handlers)
    spec = specs[NAME]

    async def call(arguments: dict[str, Any]) -> dict[str, Any]:
        result = await _request(dispatcher, "tools/call", {"name": NAME, "arguments": arguments})
        return json.loads(result["content"][0]["text"])  # type: ignore[no-any-return]

    assert await call(sample_arguments(spec, 1)) == {"ok": True, "months": [], "pool": "primary"}
    for field, arguments in [*bad_arguments(spec, 1), misspelt(spec, 1)[1::-1]]:
        error = (await call(arguments))["error"]
        assert error["code"] == "INVALID_INPUT", (field, arguments)
        assert error["detail"]["field"] == field
    assert (await call({"months": 61}))["error"]["detail"] == {"field": "months"}


async def test_the_throwaway_tools_command_is_served_by_a_replica(
    specs: dict[str, ToolSpec], handlers: Handlers
) -> None:
    async def run(deps: Deps, meta: CallMeta, cmd: Command) -> dict[str, Any]:
        return await handlers.of(type(cmd)).handler(deps, meta, cmd)

    routed = routed_runner(run, Replicas(), handlers.read_commands())  # type: ignore[arg-type]
    deps = Deps(settings=Settings(), pool="primary", embedder=None)  # type: ignore[arg-type]
    cmd = specs[NAME].parse({}, deps.settings)
    assert (await routed(deps, CallMeta(7), cmd))["pool"] == "replica"
    assert specs[NAME].read_only


def test_the_recipe_names_every_step_this_test_needed() -> None:
    recipe = RECIPE.read_text(encoding="utf-8")
    steps = [
        "../shared/spec/mcp-tools.texi",  # the contract, beside the repository
        "@menu",  # and its menu entry
        "@node The memory_timeline tool",
        "storage/",  # the SQL
        "user_id",  # scoped by user (the shard-ready check)
        "@command",  # the command, registered for the queue
        "parse(raw, settings)",
        "@handles(",  # the handler, declared once, read or write
        "reads=True",
        "memory/handlers.py",  # a new use-case module is imported there
        "ToolSpec(",  # the one declaration
        "FAMILIES",
        "tests/tool_samples.py",  # per-tool test data, in one place, only if needed
        "python -m tests.api.test_tools_snapshot > tests/api/tools_list.snapshot.json",
        "docs/architecture.md",  # the documentation table
        "pytest tests/api/test_tools_size.py -s",  # the budget, printed
    ]
    assert [step for step in steps if step not in recipe] == []
    # Every field this test's declaration gave is named in the recipe's.
    fields = [f.name for f in dataclasses.fields(ToolSpec) if f.name != "reads"]
    assert [f for f in fields if not re.search(rf"\b{f}\b", recipe)] == []


def test_the_recipe_states_the_budget_the_size_test_holds() -> None:
    from tests.api.test_tools_size import AVERAGE_PER_TOOL

    recipe = RECIPE.read_text(encoding="utf-8")
    assert f"**{AVERAGE_PER_TOOL} bytes per tool**" in recipe
    assert f"**{PER_TOOL:,} bytes**" in recipe


def test_the_architecture_table_names_every_tool() -> None:
    table = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `(\w+)` \| (?:inline|worker) \|", table, flags=re.MULTILINE))
    assert rows == set(tool_specs(Settings()))


# --- the startup check --------------------------------------------------------------------


def test_a_tool_without_a_handler_stops_the_process() -> None:
    command(ThrowawayTimeline)
    try:
        with pytest.raises(RegistryError, match="ThrowawayTimeline has no handler"):
            tool_specs(Settings(), (*FAMILIES, throwaway_tools), HANDLING.copy())
    finally:
        del REGISTERED[ThrowawayTimeline.type_name()]


def test_a_handler_without_a_tool_stops_the_process(handlers: Handlers) -> None:
    with pytest.raises(RegistryError, match="ThrowawayTimeline has a handler but no tool"):
        tool_specs(Settings(), FAMILIES, handlers)


def test_a_name_declared_twice_stops_the_process(handlers: Handlers) -> None:
    with pytest.raises(RegistryError, match=f"{NAME!r} is declared twice"):
        tool_specs(Settings(), (*FAMILIES, throwaway_tools, throwaway_tools), handlers)


def test_a_command_the_queue_cannot_carry_stops_the_process(handlers: Handlers) -> None:
    del REGISTERED[ThrowawayTimeline.type_name()]
    try:
        with pytest.raises(RegistryError, match="ThrowawayTimeline lacks @command"):
            tool_specs(Settings(), (*FAMILIES, throwaway_tools), handlers)
    finally:
        command(ThrowawayTimeline)


def test_a_read_tool_with_write_hints_stops_the_process(handlers: Handlers) -> None:
    def destructive_reader(s: Schemas) -> list[ToolSpec]:
        return [dataclasses.replace(throwaway_tools(s)[0], destructive=True)]

    with pytest.raises(RegistryError, match="only reads: it has no write hints"):
        tool_specs(Settings(), (*FAMILIES, destructive_reader), handlers)


def test_a_second_handler_for_one_command_is_refused(handlers: Handlers) -> None:
    with pytest.raises(TypeError, match="ThrowawayTimeline has two handlers"):
        handlers.handles(ThrowawayTimeline, reads=True)(throwaway_timeline)
