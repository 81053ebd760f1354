"""The relation graph's use cases: ``query_relations`` and the extraction job (SUPPLEMENT §6).

Extraction is owed through an outbox (``storage.outbox``): the write's own
transaction records it (triggers on ``memories``), so a crash or a broker
outage after the commit cannot lose it. Three things relay it to the
``extract_relations`` actor through the ``Deps.on_text_stored`` hook:

- :func:`text_stored`, which the write paths call once their transaction has
  committed (the fast path; an unreachable broker makes the entries due now);
- :func:`relay_due`, the sweep: at start-up and every ``SWEEP_INTERVAL_S`` in
  each web process (:func:`sweep_forever`), it sends the entries due (a relay
  that failed, an import's, one that was sent long ago and never finished);
- :func:`rebuild_relations` (``ownsona relations rebuild``) extracts every
  memory again, in the calling process.

An entry is deleted only in the transaction that stores the memory's edges,
so a job lost with its worker (the in-process broker keeps nothing) is sent
again; a job whose entry is gone (a retry, a resend, a duplicate) returns
before extracting, and one run twice anyway changes nothing (extraction
replaces the edges).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from storage import outbox
from storage import relations as store
from storage.sealing.scope import sealing_as

from . import graph
from .call_keys import call_scope
from .calls import CallMeta
from .commands.handling import handles
from .commands.relations import QueryRelations
from .deps import Deps

if TYPE_CHECKING:
    # The protocol only: the extractor itself comes in Deps (built by bootstrap).
    from memory.providers.extractors import Extractor

#: Hops query_relations follows by default, and at most.

#: A write's own relay is trusted this long before the sweep sends its entries
#: again (a job lost in a crash, or given up by the broker after its retries).
RELAYED_GRACE_S = 3600.0
#: After each send by the sweep an entry waits this long, doubled per earlier send, at most a day.
RESEND_BACKOFF_S = 3600.0
MAX_RESEND_BACKOFF_S = 86_400.0
#: Seconds between two sweeps in a web process.
SWEEP_INTERVAL_S = 30.0
#: Entries claimed per sweep transaction, and at most per sweep.
SWEEP_CLAIM = 500
SWEEP_MAX = 10_000
#: A claimed entry is not due again for at least this long, even with a short
#: back-off: far more than sending a claim normally takes. A send that stalls
#: on a silent Redis holds no lock (the claim has committed), so it delays only
#: the sweep, never an edit; its entries are due again when the lease ends.
CLAIM_LEASE_S = 600.0
#: ``ownsona relations rebuild`` holds its entries back from the sweep this long.
REBUILD_HOLD_S = 3600.0
#: Memories a rebuild extracts at once (an LLM extractor waits on the network).
REBUILD_CONCURRENCY = 4
_REBUILD_PAGE = 200

_log = logging.getLogger(__name__)


@handles(QueryRelations, reads=True)
async def query_relations(deps: Deps, meta: CallMeta, command: QueryRelations) -> dict[str, Any]:
    user_id, entity, hops = meta.user_id, command.entity, command.max_hops
    cap = deps.settings.graph_max_relations
    walk = graph.Traversal(entity, max_hops=hops, max_edges=cap)
    texts: dict[int, str] = {}
    # One transaction: one snapshot for the whole walk.
    async with deps.pool.connection() as conn, conn.transaction():
        while (request := walk.wanted()) is not None:
            room = cap + 1 + len(walk.edges)  # one more than fits: truncation shows
            rows = await store.edges_touching(conn, user_id, request.expand, limit=room)
            rows += await store.role_edges(
                conn, user_id, request.owners, request.predicates, limit=room
            )
            texts.update((r.memory_id, r.source_text) for r in rows)
            walk.feed(graph.Edge(r.id, r.subject, r.predicate, r.object, r.memory_id) for r in rows)
    relations = [
        {
            "subject": edge.subject,
            "predicate": edge.predicate,
            "object": edge.object,
            "source_memory_id": edge.memory_id,
            "source_text": texts[edge.memory_id],
        }
        for edge, _hop in walk.edges
    ]
    summary: dict[str, Any] = {"count": len(relations)}
    if walk.truncated:
        summary["truncated"] = True
    return {"ok": True, "entity": entity, "relations": relations, "summary": summary}


async def extract_relations(
    deps: Deps, user_id: int, memory_id: int, *, extractor: Extractor | None = None
) -> int | None:
    """:func:`extract_in_scope` with the user's keys (a background job: no tool call's scope)."""
    with sealing_as(await call_scope(deps, user_id)):
        return await extract_in_scope(deps, user_id, memory_id, extractor=extractor)


async def extract_in_scope(
    deps: Deps, user_id: int, memory_id: int, *, extractor: Extractor | None = None
) -> int | None:
    """Replace the memory's edges with those extracted from its current text.

    Returns the number of edges stored, or None when there was nothing to do
    (no extraction is owed any more: a retried or resent job whose memory is
    already done; the memory is gone or forgotten; or its text changed while
    extracting: the job queued by that change does it). The owed check comes
    first, so nothing costly (an LLM call) is spent on a job that owes
    nothing; an entry is committed before any job for it is sent. The memory's outbox entry goes
    with the edges' transaction (or now, for a forgotten memory). Extraction
    failures (:class:`~memory.providers.extractors.ExtractionError`) and database errors
    propagate so that the job is retried, and the entry stays; the memory
    itself is never touched. With no extractor (``extractor`` and
    ``deps.extractor`` both None: ``RELATION_EXTRACTOR=off`` in this process)
    the memory's old edges are removed.
    """
    chosen = extractor or deps.extractor
    async with deps.pool.connection() as conn:
        if not await outbox.is_owed(conn, user_id, memory_id):
            return None
        source = await store.source_text(conn, user_id, memory_id)
        if source is not None and source.deleted:
            await outbox.finish(
                conn, user_id, memory_id
            )  # forgotten: nothing owed (its edges stay hidden)
    if source is None or source.deleted:
        return None
    relations = await chosen.extract(source.text) if chosen is not None else []
    edges = [store.NewEdge(r.subject, r.predicate, r.object) for r in relations]
    async with deps.pool.connection() as conn, conn.transaction():
        current = await store.source_text(conn, user_id, memory_id, lock=True)
        if current is not None and current.deleted:
            await outbox.finish(conn, user_id, memory_id)  # forgotten meanwhile
        if current is None or current.deleted or current.text != source.text:
            return None
        await store.delete_edges(conn, user_id, memory_id)
        await store.insert_edges(conn, user_id, memory_id, edges)
        await outbox.finish(conn, user_id, memory_id)
    return len(edges)


async def text_stored(
    deps: Deps, user_id: int, memory_ids: list[int], *, owed_only: bool = False
) -> None:
    """Relay now the extraction these memories' write has just recorded in the outbox.

    Call only after the write's transaction has committed. Runs the hook in a
    thread (it may talk to Redis) and never raises: the write has succeeded.
    When the hook fails the entries become due, and the next sweep sends them.
    ``owed_only``: first drop the memories owed nothing (an update that kept
    the text, or the replay of an update whose extraction is done).
    """
    hook = deps.on_text_stored
    if hook is None or not memory_ids:
        return
    if owed_only:
        try:
            async with deps.pool.connection() as conn:
                memory_ids = await outbox.owed_among(conn, memory_ids)
        except Exception:
            _log.warning(
                "could not read the relation outbox; relaying every changed memory", exc_info=True
            )
        if not memory_ids:
            return
    try:
        await asyncio.to_thread(hook, user_id, list(memory_ids))
        return
    except Exception:
        _log.warning(
            "could not enqueue relation extraction for %d memories; the outbox sweep will send it",
            len(memory_ids),
            exc_info=True,
        )
    try:
        async with deps.pool.connection() as conn:
            await outbox.relay_failed(conn, memory_ids)
    except Exception:
        # Still owed: the sweep sends it once the grace period is over.
        _log.exception("could not mark %d relation extractions as due", len(memory_ids))


async def relay_due(
    deps: Deps,
    *,
    everything: bool = False,
    grace_s: float = RELAYED_GRACE_S,
    backoff_s: float = RESEND_BACKOFF_S,
) -> int:
    """Send the outbox entries that are due (with ``everything``, all); return how many were sent.

    Sends at most ``SWEEP_MAX``; see :func:`_relay`. When the broker cannot be
    reached its error propagates and the entries not sent are due again now.
    """
    sent, _ = await _relay(deps, everything=everything, grace_s=grace_s, backoff_s=backoff_s)
    return sent


async def _relay(
    deps: Deps,
    *,
    everything: bool,
    grace_s: float = RELAYED_GRACE_S,
    backoff_s: float = RESEND_BACKOFF_S,
    after: int = 0,
    claim: int = SWEEP_CLAIM,
    most: int = SWEEP_MAX,
) -> tuple[int, int]:
    """Send up to ``most`` due entries with ``memory_id > after``; return (sent, the last id claimed).

    Each claim of up to ``claim`` entries commits before its jobs are sent, so
    no row stays locked while the broker is slow (an edit of a claimed memory,
    or its extraction finishing, would wait for it). A failed send makes the
    entries it did not send due again now and propagates.
    """
    hook = deps.on_text_stored
    if hook is None:
        return 0, after
    sent = 0
    while sent < most:
        limit = min(claim, most - sent)
        async with deps.pool.connection() as conn, conn.transaction():
            claimed = await outbox.claim_due(
                conn,
                relayed_grace_s=grace_s,
                backoff_s=backoff_s,
                max_backoff_s=max(backoff_s, MAX_RESEND_BACKOFF_S),
                lease_s=CLAIM_LEASE_S,
                limit=limit,
                after=after,
                everything=everything,
            )
        if not claimed:
            break
        done: list[int] = []
        try:
            await asyncio.to_thread(_send_by_user, hook, claimed, done)
        except Exception:
            # (Cancelled instead: the claim's lease runs out and a later sweep sends the rest.)
            unsent = sorted({e.memory_id for e in claimed} - set(done))
            try:
                async with deps.pool.connection() as conn:
                    await outbox.unclaim(conn, unsent)
            except Exception:
                # The send's error is the one to report; these wait out their back-off instead.
                _log.warning(
                    "could not make %d unsent extractions due again", len(unsent), exc_info=True
                )
            raise
        finally:
            sent += len(done)
        after = claimed[-1].memory_id
        if len(claimed) < limit:
            break
    if sent:
        _log.info("relayed %d owed relation extractions", sent, extra={"relayed": sent})
    return sent, after


def _send_by_user(
    hook: Callable[[int, list[int]], None], claimed: list[outbox.Owed], done: list[int]
) -> None:
    """Send the claimed entries, one hook call per user; ``done`` collects the ids sent."""
    by_user: dict[int, list[int]] = {}
    for entry in claimed:
        by_user.setdefault(entry.user_id, []).append(entry.memory_id)
    for user_id, memory_ids in by_user.items():
        hook(user_id, memory_ids)
        done.extend(memory_ids)


async def sweep_forever(
    deps: Deps,
    *,
    everything_first: bool,
    interval_s: float = SWEEP_INTERVAL_S,
    claim: int = SWEEP_CLAIM,
    most: int = SWEEP_MAX,
) -> None:
    """Relay due outbox entries now and every ``interval_s`` until cancelled; never raises.

    ``everything_first``: the start-up sweeps send every entry (an in-process
    broker lost the jobs of the process before), ``most`` per sweep, each
    going on from the last id of the one before without waiting, until one
    sends fewer than ``most``. Several web processes sweep without sending an
    entry twice: a claim skips the rows another one is claiming and pushes the
    claimed ones' next send back.
    """
    resume: int | None = 0 if everything_first else None  # where the send-everything pass goes on
    while True:
        wait = interval_s
        try:
            if resume is not None:
                sent, last = await _relay(
                    deps, everything=True, after=resume, claim=claim, most=most
                )
                resume = last if sent >= most else None
                if resume is not None:
                    wait = 0
            else:
                await _relay(deps, everything=False, claim=claim, most=most)
        except asyncio.CancelledError:
            raise
        except Exception:
            _log.warning(
                "the relation outbox sweep failed; it runs again in %gs", interval_s, exc_info=True
            )
        await asyncio.sleep(wait)


@dataclass
class RebuildSummary:
    """What ``ownsona relations rebuild`` did."""

    memories: int = 0  # active memories owed an extraction
    extracted: int = 0
    edges: int = 0
    skipped: int = 0  # forgotten or changed meanwhile (the change's own job does it)
    failed: int = 0  # left owed: the sweep retries them


async def rebuild_relations(
    deps: Deps,
    user_id: int | None,
    *,
    progress: Callable[[RebuildSummary], None] | None = None,
    hold_s: float = REBUILD_HOLD_S,
    page_size: int = _REBUILD_PAGE,
) -> RebuildSummary:
    """Extract the relations of every active memory again (of ``user_id``, or everyone's).

    Every memory is first recorded as owed (one transaction), so a rebuild cut
    short is finished by the sweep once ``hold_s`` has passed. The hold is
    renewed for each page just before it is extracted: a rebuild that runs
    longer than ``hold_s`` is not duplicated by a server's sweep.
    """
    summary = RebuildSummary()
    async with deps.pool.connection() as conn, conn.transaction():
        summary.memories = await outbox.owe_all(conn, user_id, hold_s=hold_s)
    extractor = deps.extractor
    gate = asyncio.Semaphore(REBUILD_CONCURRENCY)

    async def one(entry: outbox.Owed) -> None:
        async with gate:
            try:
                stored = await extract_relations(
                    deps, entry.user_id, entry.memory_id, extractor=extractor
                )
            except Exception as ex:
                summary.failed += 1
                # The memory's id and the error's kind only: never its text.
                _log.warning(
                    "relation extraction failed for memory %d: %s",
                    entry.memory_id,
                    type(ex).__name__,
                )
                return
        if stored is None:
            summary.skipped += 1
        else:
            summary.extracted += 1
            summary.edges += stored

    after = 0
    while True:
        async with deps.pool.connection() as conn:
            page = await outbox.owed_page(conn, user_id, after=after, limit=page_size)
            if page:
                await outbox.hold(conn, [entry.memory_id for entry in page], hold_s=hold_s)
        if not page:
            break
        await asyncio.gather(*(one(entry) for entry in page))
        after = page[-1].memory_id
        if progress is not None:
            progress(summary)
    return summary
