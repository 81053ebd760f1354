"""A worker is killed: its users get the documented retryable error within 5 s, never a
hang, and users on the other worker do not notice (issue 32, docs/scaling.md runbook).

The worker comes back afterwards (its cluster directory is intact: a process kill keeps
what it wrote), for the tests that follow in the session.
"""

from __future__ import annotations

import time

from scripts.cluster.citus_nodes import CitusCluster
from tests.service.helpers import call, fails


async def test_a_killed_workers_users_get_a_retryable_error_and_the_others_do_not_notice(
    deps, alice: int, bob: int, citus: CitusCluster
) -> None:
    mine = (await call(deps, alice, "remember", text="My sister Ana lives in Porto."))["memory_id"]
    theirs = (await call(deps, bob, "remember", text="I have a cat named Tom."))["memory_id"]
    node = citus.worker_of(bob)
    node.kill()
    try:
        for tool, args in (("get_memory", {"id": theirs}), ("remember", {"text": "I like tea."})):
            began = time.monotonic()
            error = await fails(deps, bob, tool, "DATABASE_ERROR", **args)
            assert time.monotonic() - began < 5, tool
            assert "Try again" in error.message
        assert (await call(deps, alice, "get_memory", id=mine))["memory"]["id"] == mine
        found = await call(deps, alice, "recall", query="where does my sister live?")
        assert found["matches"][0]["id"] == mine
        assert (await call(deps, alice, "remember", text="I play the cello."))["ok"]
    finally:
        node.start()
    # Back: Bob's memory is there again, under its id.
    assert (await call(deps, bob, "get_memory", id=theirs))["memory"]["id"] == theirs
