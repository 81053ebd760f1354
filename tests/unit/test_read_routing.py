"""Which pool each tool's command is run on: a replica exactly for the tools that only read.

Every tool of the registry, with its sample arguments (``tests.tool_samples``),
through ``bootstrap.read_routing.routed_runner`` over one healthy replica: a tool
listed read-only (its handler declared ``@handles(..., reads=True)``) is served by
the replica, any other by the primary. Nothing here keeps a list of read tools:
a new read tool is routed by its declaration, or this fails naming it. The queued
read tools (the scans) run on a worker, which reads the primary: what is checked
for them is the runner's decision, were they inline. (The real replicas, lag and
read-your-writes: ``tests/storage/test_replicas.py``.)
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from api.mcp.tools import tool_specs
from bootstrap.read_routing import routed_runner
from config.settings import Settings
from memory.calls import CallMeta
from memory.commands import Command
from memory.deps import Deps
from tests.tool_samples import sample_arguments

SPECS = tool_specs(Settings())


class OneReplica:
    """A replica set whose one replica is healthy and caught up (``storage.replicas``' view)."""

    primary = "primary"

    async def pool_for_read(self, user_id: int) -> str:
        return "replica"

    def mark_down(self, pool: Any) -> None:
        raise AssertionError("the replica did not fail")

    def went_down(self, pool: Any) -> asyncio.Event:
        return asyncio.Event()  # never set: the replica stays up


async def _pool_of(command: Command) -> str:
    async def run(deps: Deps, meta: CallMeta, command: Command) -> dict[str, Any]:
        return {"ok": True, "pool": deps.pool}

    routed = routed_runner(run, OneReplica())  # type: ignore[arg-type]
    deps = Deps(settings=Settings(), pool="primary", embedder=None)  # type: ignore[arg-type]
    return (await routed(deps, CallMeta(7), command))["pool"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("tool", list(SPECS))
async def test_a_replica_serves_exactly_the_tools_that_only_read(tool: str) -> None:
    spec = SPECS[tool]
    command = spec.parse(sample_arguments(spec, 1), Settings())
    assert await _pool_of(command) == ("replica" if spec.read_only else "primary")


def test_the_tools_listed_read_only_are_those_whose_handlers_only_read() -> None:
    read_only = {name for name, spec in SPECS.items() if spec.annotations["readOnlyHint"]}
    assert read_only == {name for name, spec in SPECS.items() if spec.read_only}
    assert read_only and read_only != set(SPECS)
