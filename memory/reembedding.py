"""Re-embedding the store with the active model (SUPPLEMENT §10), one batch at a time.

The active model is the one the settings configure (``deps.embedder``). Rows
whose provider or model differ are re-embedded: in place when the store has
the model's dimension, otherwise into a staging column that replaces the live
one in a single transaction once every row is staged (``storage/reembed.py``
describes both). The operator's command (``ownsona reembed``) plans, pages
through stale ids and sends :func:`reembed_batch` to the workers; the rows
carry the progress, so a run that is interrupted and started again only does
what is left.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from storage import own_indexes
from storage import reembed as store
from storage.schema import stored_dimensions
from storage.sealing.scope import Scope, sealing_as

from .deps import Deps
from .errors import EMBEDDING_ERROR, MemoryServiceError

_log = logging.getLogger(__name__)

IN_PLACE = "in_place"
STAGED = "staged"

#: Transactions that write one batch's rows at once. Rewriting a vector inserts
#: it into the HNSW graph (~1.3 ms of one PostgreSQL backend a row); a single
#: statement does that on one core while the embedder waits for the next batch.
#: Two halves at once keep two cores busy (``ownsona reembed`` 0.76-0.79 ->
#: 0.83-0.85 of the raw embedder's rate on 2 cores, BENCHMARKS.md). Safe to
#: split: each row is guarded on its own, and progress lives in the rows.
PARALLEL_WRITES = 2


@dataclass(frozen=True)
class Target:
    """The model rows are moved to; sent with every batch so a worker can check it has it."""

    provider: str
    model: str
    dimensions: int

    def as_message(self) -> dict[str, Any]:
        return {"provider": self.provider, "model": self.model, "dimensions": self.dimensions}

    def describe(self) -> str:
        return f"{self.provider} model {self.model!r} ({self.dimensions} dimensions)"


@dataclass(frozen=True)
class Plan:
    target: Target
    #: IN_PLACE or STAGED.
    mode: str
    #: The store's current (live) dimension.
    store_dimensions: int
    #: Rows still to re-embed when the plan was made.
    stale: int

    @property
    def staged(self) -> bool:
        return self.mode == STAGED


async def active_target(deps: Deps) -> Target:
    dimensions = await deps.embedder.ensure_ready()
    return Target(deps.embedder.provider, deps.embedder.model, dimensions)


async def survey(deps: Deps) -> Plan:
    """What a run would do, changing nothing (``--dry-run``)."""
    target = await active_target(deps)
    async with deps.pool.connection() as conn:
        live = await _store_dimensions(conn)
        if live == target.dimensions:
            stale = await store.count_stale(
                conn, provider=target.provider, model=target.model, staged=False
            )
            return Plan(target, IN_PLACE, live, stale)
        staging = await store.column_dimensions(conn, store.STAGING_COLUMN)
        if staging == target.dimensions:
            stale = await store.count_stale(
                conn, provider=target.provider, model=target.model, staged=True
            )
        else:  # nothing staged yet, or staged for another model: every row is to do
            stale = await store.count_stale(conn, provider="", model="", staged=False)
        return Plan(target, STAGED, live, stale)


async def prepare(deps: Deps) -> Plan:
    """Make the store ready for a run: add (or replace) the staging column when needed."""
    target = await active_target(deps)
    async with deps.pool.connection() as conn, conn.transaction():
        live = await _store_dimensions(conn)
        staging = await store.column_dimensions(conn, store.STAGING_COLUMN)
        if live == target.dimensions:
            if staging is not None:
                # A switch to another width was abandoned; its trigger would only cost.
                _log.info(
                    "dropping the staging column of an abandoned %d-dimension switch", staging
                )
                await store.drop_staging(conn)
        elif staging != target.dimensions:
            if staging is not None:
                await store.drop_staging(conn)
            await store.create_staging(conn, target.dimensions)
    return await survey(deps)


async def stale_id_batches(deps: Deps, plan: Plan, batch_size: int) -> AsyncIterator[list[int]]:
    """One pass over the stale rows in id order, ``batch_size`` ids at a time.

    Rows that become stale behind the pass (an edit by a server still on the
    old model) are found by the next pass; the caller repeats until a pass
    finds nothing.
    """
    after = 0
    while True:
        async with deps.pool.connection() as conn:
            ids = await store.stale_ids_after(
                conn,
                after,
                batch_size,
                provider=plan.target.provider,
                model=plan.target.model,
                staged=plan.staged,
            )
        if not ids:
            return
        after = ids[-1]
        yield ids


async def reembed_batch(deps: Deps, ids: list[int], target: dict[str, Any]) -> dict[str, Any]:
    """Re-embed those of ``ids`` that are still stale: one embedding call, then the rows
    are written by :data:`PARALLEL_WRITES` transactions at once.

    Safe to repeat: rows already done are skipped, so a redelivered message
    costs a query and no embedding. Returns ``{"ok": true, "done": n, "skipped": k}``.
    """
    mine = await active_target(deps)
    if mine.as_message() != target:
        raise MemoryServiceError(
            EMBEDDING_ERROR,
            f"This worker embeds with the {mine.describe()}, not the "
            f"{Target(**target).describe()} being re-embedded to; start the re-embedding "
            "workers with the new model's settings.",
            {"provider": mine.provider, "model": mine.model},
        )
    async with deps.pool.connection() as conn:
        live = await _store_dimensions(conn)
        staged = live != mine.dimensions
        if staged and await store.column_dimensions(conn, store.STAGING_COLUMN) != mine.dimensions:
            raise MemoryServiceError(
                EMBEDDING_ERROR,
                "The store has no staging column for this model's dimension; run `ownsona reembed`.",
                {"dimensions": mine.dimensions},
            )
        rows = await store.stale_rows(
            conn, ids, provider=mine.provider, model=mine.model, staged=staged
        )
    rows = await _opened(deps, rows)
    if not rows:
        return {"ok": True, "done": 0, "skipped": len(ids)}
    # Outside any transaction: a slow provider must not hold row locks.
    vectors = await deps.embedder.embed([r.text for r in rows])

    async def write_part(part: slice) -> int:
        async with deps.pool.connection() as conn, conn.transaction():
            return await store.write_vectors(
                conn,
                rows[part],
                vectors[part],
                provider=mine.provider,
                model=mine.model,
                staged=staged,
            )

    step = -(-len(rows) // PARALLEL_WRITES)
    async with asyncio.TaskGroup() as group:  # one part failing cancels the other
        writes = [
            group.create_task(write_part(slice(i, i + step))) for i in range(0, len(rows), step)
        ]
    done = sum(task.result() for task in writes)
    return {"ok": True, "done": done, "skipped": len(ids) - done}


async def _opened(deps: Deps, rows: list[store.StaleRow]) -> list[store.StaleRow]:
    """The rows' texts, sealed ones opened with their users' keys (docs/at-rest.md).

    A batch spans users: the keys of each user with a sealed row in it are in scope
    for reading only. No keyring (no master key in this process): a sealed row is
    refused (SealingError), never embedded as its stored ''.
    """
    owners = {r.user_id for r in rows if r.text_sealed is not None}
    readable = {}
    if owners and deps.keyring is not None:
        readable = {u: await deps.keyring.user_keys(u, create=False) for u in sorted(owners)}
    with sealing_as(Scope(None, seal_writes=False, readable=readable) if readable else None):
        return store.opened(rows)


async def hold_autovacuum(deps: Deps) -> None:
    """For the run: autovacuum off ``memories`` (``storage/reembed.py`` says why)."""
    async with deps.pool.connection() as conn:
        await store.hold_autovacuum(conn)


async def resume_autovacuum(deps: Deps) -> None:
    async with deps.pool.connection() as conn:
        await store.resume_autovacuum(conn)


async def vacuum(deps: Deps) -> None:
    """Once at the end of a run: reclaim every row version it left behind."""
    async with deps.pool.connection() as conn:
        await store.vacuum(conn)


async def build_index(deps: Deps, plan: Plan) -> bool:
    """Staged: build the staging column's HNSW index unless it is there; True if it built.

    Run once the column is filled; the server keeps serving meanwhile.
    """
    if not plan.staged:
        return False
    async with deps.pool.connection() as conn:
        built = await store.build_staging_index(conn)
    if built:
        _log.info("built the HNSW index of the %d-dimension staging column", plan.target.dimensions)
    return built


async def finish(deps: Deps, plan: Plan) -> int:
    """Complete the run; return how many rows are still stale (then run another pass).

    In place: record the store's model. Staged (after :func:`build_index`):
    under a lock that holds off the server, check that nothing is left and
    swap the column in; the swap refuses a column without a valid index.
    """
    target = plan.target
    async with (
        deps.pool.connection() as conn,
        # The swap locks the table: behind a running own-index build (minutes) that
        # lock would wait with every request queued behind it. Wait for the build here.
        own_indexes.hold_own_index_lock(conn),
        conn.transaction(),
    ):
        if plan.staged:
            await store.lock_memories(conn)
        left = await store.count_stale(
            conn, provider=target.provider, model=target.model, staged=plan.staged
        )
        if left:
            return left
        if plan.staged:
            await store.swap_staging(
                conn, provider=target.provider, model=target.model, dimensions=target.dimensions
            )
        else:
            await store.set_store_model(conn, target.provider, target.model, target.dimensions)
    return 0


async def _store_dimensions(conn: Any) -> int:
    live = await stored_dimensions(conn)
    if live is None:
        raise MemoryServiceError(
            EMBEDDING_ERROR, "The database is not migrated; run `ownsona migrate` first.", None
        )
    return live
