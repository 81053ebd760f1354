"""Reads while the PostgreSQL primary is frozen (issue 33, READ_TIMEOUT).

A frozen server's kernel still acknowledges what it is sent, so no server-side or
TCP timeout ends a query waiting on it. A real PostgreSQL (the primary of ``pair``)
is reached through :class:`~tests.faults.stall_proxy.StallProxy`; ``freeze`` stops every byte
both ways on every connection, old and new, and closes nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool

from bootstrap.read_deadline import bounded_reads
from bootstrap.read_routing import routed_runner
from config.settings import Settings
from memory.calls import CallMeta
from memory.deps import Deps
from memory.errors import DATABASE_ERROR, MemoryServiceError
from memory.handlers import dispatch
from storage.pool import connection_defaults, make_pool
from tests.faults.stall_proxy import StallProxy
from tests.tool_calls import parse_command

from .pg_pair import Server

Pair = tuple[Server, Server]

#: Slack for a loaded test machine beyond the documented deadline.
SLACK_S = 1.5


#: A user with no memories: a read of theirs still asks the database.
NOBODY = 10**9


@pytest.fixture
def primary_proxy(pair: Pair) -> Iterator[StallProxy]:
    with StallProxy(pair[0].port) as proxy:
        yield proxy


@pytest.fixture
async def proxied_pool(primary_proxy: StallProxy) -> AsyncIterator[AsyncConnectionPool]:
    proxied = f"postgresql://postgres@{primary_proxy.address}/ownsona"
    pool = make_pool(connection_defaults(proxied), min_size=2, max_size=4, name="proxied")
    await pool.open(wait=True)
    yield pool
    primary_proxy.set_mode("pass")
    await pool.close(timeout=5)


async def test_a_read_on_a_frozen_primary_is_answered_within_read_timeout_and_the_pool_heals(
    proxied_pool: AsyncConnectionPool, embedder: Any, primary_proxy: StallProxy
) -> None:
    """A read that must go to the primary waited for the thaw (8.3 s in the drill, without
    end in principle); it is now answered DATABASE_ERROR within READ_TIMEOUT, and once the
    primary answers again the next reads work on the same pool."""
    settings = Settings(public_url="http://127.0.0.1:8000")
    deadline_s = settings.read_timeout_s
    assert deadline_s == 5.0, "docs/stalls.md and docs/settings.md state 5 s"
    # As the web process composes it (bootstrap.web), here without replicas.
    run = routed_runner(bounded_reads(dispatch, deadline_s), None)
    deps = Deps(settings=settings, pool=proxied_pool, embedder=embedder)
    count = parse_command("count_memories", {}, settings)
    listing = parse_command("list_memories", {}, settings)
    assert (await run(deps, CallMeta(NOBODY), count))["ok"]

    primary_proxy.set_mode("freeze")
    started = time.monotonic()
    with pytest.raises(MemoryServiceError) as caught:
        await asyncio.wait_for(run(deps, CallMeta(NOBODY), count), deadline_s + 30)
    took = time.monotonic() - started
    assert took < deadline_s + SLACK_S, f"the read waited {took:.1f} s on a frozen primary"
    assert took >= deadline_s - 0.1, f"answered after {took:.1f} s, before its deadline"
    assert caught.value.code == DATABASE_ERROR
    assert "READ_TIMEOUT" in caught.value.message

    primary_proxy.set_mode("pass")
    # Every connection of the pool at once: none is handed out half-used.
    answers = await asyncio.wait_for(
        asyncio.gather(*(run(deps, CallMeta(NOBODY), q) for q in (count, listing) * 2)),
        deadline_s * 2,
    )
    assert all(a["ok"] for a in answers)


async def test_time_spent_outside_the_database_does_not_count(
    proxied_pool: AsyncConnectionPool, embedder: Any
) -> None:
    """Only the database's wait is bounded: a read that spends longer than the deadline
    elsewhere (a slow embedding provider) is not cut off and blamed on the database."""
    settings = Settings(public_url="http://127.0.0.1:8000")

    async def slow_elsewhere(deps: Deps, meta: CallMeta, command: Any) -> dict[str, Any]:
        await asyncio.sleep(0.6)  # not on a connection: e.g. an embedding request
        async with deps.pool.connection() as conn:
            await conn.execute("SELECT 1")
        return {"ok": True}

    count = parse_command("count_memories", {}, settings)
    deps = Deps(settings=settings, pool=proxied_pool, embedder=embedder)
    answer = await bounded_reads(slow_elsewhere, 0.5)(deps, CallMeta(NOBODY), count)
    assert answer["ok"]

    async def slow_database(deps: Deps, meta: CallMeta, command: Any) -> dict[str, Any]:
        async with deps.pool.connection() as conn:
            await conn.execute("SELECT pg_sleep(3)")
        return {"ok": True}

    started = time.monotonic()
    with pytest.raises(MemoryServiceError):
        await bounded_reads(slow_database, 0.5)(deps, CallMeta(NOBODY), count)
    assert time.monotonic() - started < 0.5 + SLACK_S
