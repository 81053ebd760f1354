"""Admission: reads that embed nothing never wait behind query calls (issue 16)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from api.mcp.admission import Admission
from api.mcp.dispatch import CallContext, McpDispatcher, busy_recall_limit
from api.mcp.tools import tool_specs
from config.settings import Settings
from memory.commands import Recall
from memory.deps import Deps


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


class Calls:
    """Query calls held open until released, recording the order they started in."""

    def __init__(self, admission: Admission) -> None:
        self.admission = admission
        self.started: list[str] = []
        self.release: dict[str, asyncio.Event] = {}

    def query(self, name: str) -> asyncio.Task[None]:
        self.release[name] = asyncio.Event()

        async def run() -> None:
            async with self.admission.query():
                self.started.append(name)
                await self.release[name].wait()

        return asyncio.create_task(run())


async def test_a_light_call_runs_at_once_while_query_calls_wait() -> None:
    admission = Admission(1, light_window_s=60)
    calls = Calls(admission)
    first = calls.query("q1")
    await _settle()
    with admission.light():  # a light call is running: the limit holds
        second = calls.query("q2")
        await _settle()
        assert calls.started == ["q1"]
        assert admission.waiting == 1
        with admission.light():  # another light call does not wait for anything
            pass
    calls.release["q1"].set()
    await _settle()
    assert calls.started == ["q1", "q2"]
    calls.release["q2"].set()
    await asyncio.gather(first, second)
    assert admission.waiting == 0


async def test_queries_wait_their_turn_in_order_while_light_calls_keep_coming() -> None:
    admission = Admission(2, light_window_s=60)
    with admission.light():
        pass  # made just now: within the window
    calls = Calls(admission)
    tasks = [calls.query(f"q{i}") for i in range(5)]
    await _settle()
    assert calls.started == ["q0", "q1"]
    for i in range(5):
        calls.release[f"q{i}"].set()
        await _settle()
    await asyncio.gather(*tasks)
    assert calls.started == ["q0", "q1", "q2", "q3", "q4"]


async def test_without_light_calls_a_burst_of_queries_runs_at_once() -> None:
    # A recall-only load: no limit, so the embedder can batch them all.
    admission = Admission(2, light_window_s=60)
    calls = Calls(admission)
    tasks = [calls.query(f"q{i}") for i in range(6)]
    await _settle()
    assert len(calls.started) == 6
    for event in calls.release.values():
        event.set()
    await asyncio.gather(*tasks)


async def test_the_limit_ends_once_light_calls_stop_coming() -> None:
    admission = Admission(1, light_window_s=0)
    with admission.light():
        pass
    await asyncio.sleep(0.01)  # past a zero-second window
    calls = Calls(admission)
    tasks = [calls.query("q0"), calls.query("q1")]
    await _settle()
    assert calls.started == ["q0", "q1"]
    for event in calls.release.values():
        event.set()
    await asyncio.gather(*tasks)


async def test_waiting_queries_go_in_once_light_calls_stop_though_others_still_run() -> None:
    admission = Admission(1, light_window_s=0.05)
    with admission.light():
        pass
    calls = Calls(admission)
    first = calls.query("q1")
    second = calls.query("q2")
    await _settle()
    assert calls.started == ["q1"]
    await asyncio.sleep(0.1)  # past the window, with q1 still running
    await _settle()
    assert calls.started == ["q1", "q2"]
    for event in calls.release.values():
        event.set()
    await asyncio.gather(first, second)


async def test_a_cancelled_waiter_takes_no_slot() -> None:
    admission = Admission(1, light_window_s=60)
    with admission.light():
        pass
    calls = Calls(admission)
    first = calls.query("q1")
    second = calls.query("q2")
    third = calls.query("q3")
    await _settle()
    second.cancel()
    await _settle()
    calls.release["q1"].set()
    await _settle()
    assert calls.started == ["q1", "q3"]
    calls.release["q3"].set()
    await asyncio.gather(first, third)
    with pytest.raises(asyncio.CancelledError):
        await second


async def test_a_waiter_cancelled_as_it_is_admitted_passes_its_slot_on() -> None:
    admission = Admission(1, light_window_s=60)
    with admission.light():
        pass
    calls = Calls(admission)
    first = calls.query("q1")
    second = calls.query("q2")
    third = calls.query("q3")
    await _settle()
    calls.release["q1"].set()
    await asyncio.sleep(0)  # q1 leaves and admits q2, which has not run yet
    second.cancel()
    await _settle()
    assert calls.started == ["q1", "q3"]
    calls.release["q3"].set()
    await asyncio.gather(first, third)
    assert admission.waiting == 0


async def test_limit_zero_is_no_limit() -> None:
    admission = Admission(0, light_window_s=60)
    calls = Calls(admission)
    with admission.light():
        tasks = [calls.query(f"q{i}") for i in range(4)]
        await _settle()
    assert len(calls.started) == 4
    for event in calls.release.values():
        event.set()
    await asyncio.gather(*tasks)


def test_only_the_query_tools_wait_and_only_inline_reads_are_light() -> None:
    specs = tool_specs(Settings())
    assert {n for n, s in specs.items() if s.embeds_query} == {
        "recall",
        "search_memory",
        "build_context_prompt",
    }
    light = {n for n, s in specs.items() if s.light}
    assert {"list_memories", "get_memory", "count_memories", "text_search"} <= light
    assert not light & {"remember", "update_memory", "forget", "find_conflicts"}


def test_the_default_limit_is_two_per_cpu_with_the_local_model_only() -> None:
    assert busy_recall_limit(Settings()) >= 2
    assert busy_recall_limit(Settings()) % 2 == 0
    assert busy_recall_limit(Settings(embedding_provider="openai")) == 0
    assert busy_recall_limit(Settings(busy_recall_limit=3)) == 3
    assert busy_recall_limit(Settings(embedding_provider="openai", busy_recall_limit=5)) == 5


def test_busy_recall_limit_is_read_and_checked() -> None:
    assert Settings.from_env({"BUSY_RECALL_LIMIT": "0"}).busy_recall_limit == 0
    assert Settings.from_env({}).busy_recall_limit is None
    with pytest.raises(Exception, match="BUSY_RECALL_LIMIT"):
        Settings.from_env({"BUSY_RECALL_LIMIT": "-1"})


async def test_the_dispatcher_holds_query_calls_back_but_never_a_light_read() -> None:
    settings = Settings(busy_recall_limit=1)
    specs = tool_specs(settings)
    gate = asyncio.Event()

    async def run(deps: Any, meta: Any, command: Any) -> dict[str, Any]:
        if isinstance(command, Recall):  # slow
            await gate.wait()
            return {"ok": True, "matches": []}
        return {"ok": True, "memory": {"id": 1, "text": "x"}}

    dispatcher = McpDispatcher(
        specs,
        run,
        deps=Deps(settings=settings, pool=None, embedder=None),  # type: ignore[arg-type]
        write_queue=None,  # type: ignore[arg-type]
    )
    ctx = CallContext(user_id=1)
    first = asyncio.create_task(dispatcher.call_tool(specs["recall"], {"query": "a"}, ctx))
    await _settle()
    # A light read answers while a recall runs, and from then on the limit holds.
    assert (await dispatcher.call_tool(specs["get_memory"], {"id": 1}, ctx))["ok"] is True
    second = asyncio.create_task(dispatcher.call_tool(specs["search_memory"], {"query": "b"}, ctx))
    await _settle()
    assert dispatcher.admission.waiting == 1 and not second.done()
    gate.set()
    assert (await first)["ok"] is True and (await second)["ok"] is True
    assert dispatcher.admission.waiting == 0
