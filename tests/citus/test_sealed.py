"""Memories sealed at rest on Citus (issue 34: "on plain PostgreSQL and on the Citus layout").

Three parts, all against the Citus coordinator of ``tests/citus/conftest.py``:

- the plain suite's sealing tests, imported and run again here (``bob`` lives on the
  other worker than ``alice``, so a sealed user and a plain control sit on two nodes);
- the documented errors and two users' isolation with every write sealed (``deps`` is
  the sealed one in this module, as in a run with ``OWNSONA_TEST_SEALED=1``);
- every MCP tool through the HTTP app with ``OWNSONA_SEAL_MEMORIES`` on, then each
  worker's shard tables read directly (not through the coordinator): a marker written as
  text and as a tag is in none of them, while the same marker written plain is found
  there (the check's control, so it can fail).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import falcon.testing
import psycopg
import pytest
from psycopg import sql

from api.app import create_app
from api.runtime import Runtime
from auth.bearer import BearerValidator
from auth.keys import KeyStore
from auth.tokens import issue_access_token
from bootstrap.providers import make_extractor
from config.settings import Settings
from memory.deps import Deps
from scripts.cluster.citus_nodes import CitusCluster, CitusNode
from storage import memory_reads
from storage.sealing.errors import SealedValueError
from storage.sealing.scope import Scope, sealing_as
from tests.api.conftest import Mcp
from tests.service.helpers import call
from tests.service.test_bad_input import (  # noqa: F401 (run here again, sealed)
    seeded,
    test_a_bad_remember_batch_item_fails_alone,
    test_a_bad_update_memory_batch_item_fails_alone,
    test_bad_input_is_refused_and_changes_nothing,
    test_error_detail_names_the_field,
    test_unstorable_strings_are_invalid_input,
)
from tests.service.test_isolation import (  # noqa: F401 (run here again, sealed)
    test_changes_to_the_other_users_rows_are_not_found,
    test_forget_replaced_by_other_users_id_is_refused_like_a_missing_id,
    test_other_users_id_answers_exactly_like_a_missing_id,
    test_reads_see_only_own_rows,
    test_supersedes_and_downweights_cannot_touch_the_other_user,
    test_tags_and_stats_of_the_other_user_unaffected_by_alice,
    test_writes_do_not_dedup_against_the_other_user,
    two,
)
from tests.service.test_sealed import (  # noqa: F401 (run here again, on Citus)
    _store,
    test_a_sealed_duplicate_is_found_and_an_edit_reseals,
    test_ownsona_export_opens_every_users_sealed_rows_with_their_keys,
    test_ownsona_seal_moves_plain_rows_over_while_writes_continue,
    test_sealed_rows_hold_no_text_and_answer_as_plain_rows,
)
from tests.storage.test_shard_ready import _every_tool
from tests.tool_calls import InlineWriteQueue

MARKER = "Quorblemarker"


@pytest.fixture
def deps(sealed_deps: Deps) -> Deps:
    """Every imported test that takes ``deps`` writes sealed here."""
    return sealed_deps


def _shards_on(citus: CitusCluster, node: CitusNode) -> list[str]:
    """The shard tables (``<table>_<shardid>``) whose placement is on ``node``: distributed
    shards and reference-table copies alike, named as the node itself knows them."""
    rows = citus.coordinator.sql(
        "SELECT s.logicalrelid::regclass::text || '_' || s.shardid"
        " FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)"
        f" JOIN pg_dist_node n USING (groupid) WHERE n.nodeport = {node.port}"
    )
    return [line for line in rows.splitlines() if line]


def _shard_rows_naming(citus: CitusCluster, word: str) -> dict[str, int]:
    """How many rows of each worker's shard tables hold ``word`` (any column, any case),
    read on the worker itself."""
    found: dict[str, int] = {}
    for worker in citus.workers:
        shards = _shards_on(citus, worker)
        assert shards, f"{worker.name} holds no shards"
        with psycopg.connect(worker.dsn(), autocommit=True) as conn:
            for shard in shards:
                row = conn.execute(
                    sql.SQL(
                        "SELECT count(*) FROM {} t WHERE position(%s in lower(t::text)) > 0"
                    ).format(sql.Identifier(shard)),
                    (word.lower(),),
                ).fetchone()
                if row and row[0]:
                    found[f"{worker.name}:{shard}"] = int(row[0])
    return found


async def test_a_ciphertext_moved_to_another_row_or_user_does_not_open(
    sealed_deps: Deps, alice: int, bob: int, clean_db: str
) -> None:
    """The plain suite's test of that name, its ciphertexts moved in two steps: Citus
    cannot plan an ``UPDATE`` whose subquery reads a row of another shard without its
    user (the tampering is the test's, not the server's)."""
    await _store(sealed_deps, alice)
    bob_ids = await _store(sealed_deps, bob)
    with psycopg.connect(clean_db, autocommit=True) as conn:

        def sealed_text(user: int, memory_id: int) -> bytes:
            row = conn.execute(
                "SELECT text_sealed FROM memories WHERE user_id = %s AND id = %s",
                (user, memory_id),
            ).fetchone()
            assert row is not None
            return bytes(row[0])

        alices_first = conn.execute(
            "SELECT min(id) FROM memories WHERE user_id = %s", (alice,)
        ).fetchone()
        assert alices_first is not None
        # Alice's first text copied over Bob's first row, then Bob's second over his third.
        for source, target in (
            (sealed_text(alice, alices_first[0]), bob_ids[0]),
            (sealed_text(bob, bob_ids[1]), bob_ids[2]),
        ):
            conn.execute(
                "UPDATE memories SET text_sealed = %s WHERE user_id = %s AND id = %s",
                (source, bob, target),
            )
    keyring = sealed_deps.keyring
    assert keyring is not None
    scope = Scope(await keyring.user_keys(bob), seal_writes=True)
    async with sealed_deps.pool.connection() as conn:
        for memory_id in (bob_ids[0], bob_ids[2]):
            with sealing_as(scope), pytest.raises(SealedValueError, match="does not open"):
                await memory_reads.get_memory(conn, bob, memory_id)
        with (
            sealing_as(Scope(await keyring.user_keys(alice), seal_writes=True)),
            pytest.raises(SealedValueError, match="not user"),
        ):
            await memory_reads.get_memory(conn, bob, bob_ids[1])


async def _every_tool_sealed(
    sealed_deps: Deps, pool: Any, embedder: Any, clean_db: str, username: str
) -> int:
    """A user who writes the marker as text and tag, then calls every MCP tool, over HTTP,
    with ``OWNSONA_SEAL_MEMORIES`` on; the user's id."""
    from tests.conftest import make_user

    settings = dataclasses.replace(Settings(public_url="https://mem.example"), seal_memories=True)
    deps = Deps(
        settings=settings,
        pool=pool,
        embedder=embedder,
        extractor=make_extractor(settings),
        keyring=sealed_deps.keyring,
    )
    keystore = KeyStore(pool, access_token_ttl_s=settings.access_token_ttl_s)
    await keystore.load()
    user_id = make_user(clean_db, username)
    token = issue_access_token(
        keystore, settings, user_id=user_id, client_id="c", scope="memory:read memory:write"
    )
    runtime = Runtime(
        settings, deps, InlineWriteQueue(deps), keystore, BearerValidator(keystore, settings)
    )
    async with falcon.testing.ASGIConductor(create_app(settings, runtime=runtime)) as app:
        mcp = Mcp(app, token)
        written = await mcp.call_tool(
            "remember",
            {"text": f"My locksmith is called {MARKER} and lives in Braga.", "tags": [MARKER]},
        )
        assert written["isError"] is False, written
        await _every_tool(mcp, deps, user_id)
        found = await mcp.call_tool("recall", {"query": "who is my locksmith", "limit": 3})
    assert MARKER in str(found["structuredContent"])  # the sealed row still answers
    return user_id


async def test_every_tool_sealed_leaves_no_marker_in_any_workers_shards(
    citus: CitusCluster,
    sealed_deps: Deps,
    plain_deps: Deps,
    pool: Any,
    embedder: Any,
    clean_db: str,
    alice: int,
) -> None:
    sealed_user = await _every_tool_sealed(sealed_deps, pool, embedder, clean_db, "sealer")
    assert _shard_rows_naming(citus, MARKER) == {}
    # The control: the same marker written plain by another user is read from a shard.
    await call(plain_deps, alice, "remember", text=f"My locksmith is {MARKER}.", tags=[MARKER])
    plain = _shard_rows_naming(citus, MARKER)
    home = citus.worker_of(alice).name
    assert plain and all(place.startswith(f"{home}:") for place in plain), plain
    assert any(place.split(":")[1].startswith("memories_") for place in plain), plain
    assert citus.worker_of(sealed_user) in citus.workers
