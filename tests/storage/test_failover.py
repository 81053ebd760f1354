"""Failover of the primary (issue 29): a pool on a multi-host URL follows a promotion.

A real primary and streaming standby (``pair``). The standby is cut off from
the primary's WAL before the last writes, as asynchronous replication loses
its last lag window; then the primary is SIGKILLed and the standby promoted.
The same pool, untouched, finds the new primary within seconds; a write
caught in the switch answers DATABASE_ERROR and its retry with the same key
stores once; and no memory id handed out before the failover is handed out
again, not even those of the writes the standby never received.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from bootstrap.database import resolve_database
from config.settings import Settings
from memory.deps import Deps
from memory.errors import DATABASE_ERROR, MemoryServiceError
from storage.pool import connection_defaults, make_pool
from tests.tool_calls import USE_CASES

from .pg_pair import Server, cut_replication

Pair = tuple[Server, Server]

#: Promotion to the first successful write through the same pool, at most.
FOLLOW_S = 15.0


def _multi_host(pair: Pair, form: str) -> str:
    primary, standby = pair
    if form == "hosts":
        return f"postgresql://postgres@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/ownsona"
    return f"postgresql://postgres@/ownsona?host=127.0.0.1,127.0.0.1&port={primary.port},{standby.port}"


@pytest.fixture
async def deps(pair: Pair, embedder: Any, settings: Any) -> AsyncIterator[Deps]:
    pool = make_pool(connection_defaults(_multi_host(pair, "hosts")), min_size=2, max_size=4)
    await pool.open(wait=True)
    yield Deps(settings=settings, pool=pool, embedder=embedder)
    await pool.close()


async def _user(pool: AsyncConnectionPool) -> int:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "INSERT INTO users (username, password_hash) VALUES ('failover', 'x') RETURNING id"
        )
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def _remember(deps: Deps, user: int, text: str, key: str | None = None) -> int:
    payload = await USE_CASES["remember"](deps, user, {"text": text}, idempotency_key=key)
    return int(payload["memory_id"])


@pytest.mark.parametrize("form", ["hosts", "query"])
async def test_every_process_resolves_a_multi_host_url_to_the_writable_server(
    pair: Pair, form: str
) -> None:
    # Standby first: libpq must skip it for the primary (target_session_attrs=read-write).
    primary, standby = pair
    url = _multi_host((standby, primary), form)
    settings = Settings.from_env({"DATABASE_URL": url})
    dsn = await resolve_database(settings)  # what web, worker, stdio and the commands use
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT pg_is_in_recovery(), inet_server_port()").fetchone()
    assert row == (False, primary.port)


async def test_the_pool_follows_a_promotion_and_no_id_is_reused(deps: Deps, pair: Pair) -> None:
    primary, standby = pair
    user = await _user(deps.pool)
    kept = [await _remember(deps, user, f"The user's kept fact number {i}.") for i in range(3)]
    # Asynchronous loss: the standby stops receiving WAL; these writes are acknowledged
    # by the primary and will be lost with it.
    cut_replication(standby)
    lost = [await _remember(deps, user, f"The user's lost fact number {i}.") for i in range(40)]
    handed_out = set(kept) | set(lost)

    primary.kill()
    # Caught in the switch: no primary at all. The call answers DATABASE_ERROR, bounded.
    started = time.monotonic()
    with pytest.raises(MemoryServiceError) as caught:
        await _remember(deps, user, "The user's fact written during the failover.", key="k-1")
    assert caught.value.code == DATABASE_ERROR
    assert "Try again" in caught.value.message
    assert time.monotonic() - started < 35  # the pool's wait for a connection, not forever

    standby.promote()
    promoted_at = time.monotonic()
    new_id = None
    while new_id is None:
        try:
            new_id = await _remember(
                deps, user, "The user's fact written during the failover.", key="k-1"
            )
        except MemoryServiceError as ex:
            assert ex.code == DATABASE_ERROR
            assert time.monotonic() - promoted_at < FOLLOW_S, "the pool did not follow"
    followed_s = time.monotonic() - promoted_at
    assert followed_s < FOLLOW_S
    # The retry with the same key stores once.
    again = await _remember(deps, user, "The user's fact written during the failover.", key="k-1")
    assert again == new_id

    assert new_id not in handed_out and new_id > max(handed_out)
    more = [await _remember(deps, user, f"The user's new fact number {i}.") for i in range(5)]
    assert not handed_out & set(more)
    async with deps.pool.connection() as conn:
        row = await (
            await conn.execute(
                "SELECT count(*) FILTER (WHERE id = ANY(%s)), count(*) FILTER (WHERE text = %s)"
                " FROM memories WHERE user_id = %s",
                (lost, "The user's fact written during the failover.", user),
            )
        ).fetchone()
    # The lost writes are gone (asynchronous replication), the retried one is stored once.
    assert row == (0, 1)
    print(f"writes came back {followed_s:.2f} s after the promotion; new id {new_id}")
