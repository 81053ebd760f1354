"""Backup and restore: the use cases behind ``ownsona export`` and ``ownsona import``.

Export writes every memory of one account (or of all) in the format of
:mod:`memory.backup_format`: tombstones, tags, timestamps, learned state and
relation edges, without embedding vectors. It reads one snapshot in keyset
pages, so it streams in constant memory and its header's counts match the
lines that follow.

Import puts a file back, into an empty store or one already in use:

- The whole file is read and checked first. A malformed line (or a file
  whose lines disagree with its header, e.g. a truncated one) is refused with
  its line number and nothing at all is written.
- Accounts missing from the store are created without a password (the hash
  :data:`NO_PASSWORD_HASH` matches no password): set one with
  ``OWNSONA_LOGIN_USERNAME``/``OWNSONA_LOGIN_PASSWORD`` on the next
  ``ownsona serve`` (``auth.accounts.ensure_login_user`` replaces it).
- Memories keep their ids. One whose id another memory holds in this store
  gets a fresh id, and the ``replaced_by_id`` pointers of the file's rows are
  moved along with it.
- A memory already present (same account and id and creation time, or, when
  renumbered, same account, creation time and text) is skipped, not changed:
  re-running an import inserts nothing. An active memory whose text the
  account already holds in another active row is skipped too (the store's
  one-active-copy rule, SUPPLEMENT §2).
- Texts are embedded again with the active embedder, one ``embed`` call per
  batch; each batch is one transaction (all or nothing), so an interrupted
  import leaves whole batches and a re-run finishes the rest.
- ``context_centroid`` lives in the space of the model the row was embedded
  with; it is kept only when the importing store embeds with that same
  provider and model, otherwise it is cleared with ``context_count`` 0.
- With a keyring (the store seals, docs/at-rest.md) the rows are written sealed
  with their users' keys, as a tool's write seals them; the probes above then
  match the stored keyed hash of the text as well as a plain row's text.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from memory.rules.text import normalize_text
from storage import backup as store
from storage import sealing_move
from storage import users as user_store
from storage.sealing.scope import Scope, sealing_as
from storage.sealing.user_keys import TEXT, UserKeys

from .backup_file import batches as _batches
from .backup_file import check_file
from .backup_format import (
    Header,
    MemoryRecord,
    RelationRecord,
    UserEntry,
    header_line,
    record_line,
)
from .errors import invalid
from .keyring import Keyring

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

    from memory.providers.embedders import Embedder

#: Stored as the password hash of accounts an import creates: no argon2 hash,
#: so no password matches it until one is set.
NO_PASSWORD_HASH = "!"
#: Memories read per export query.
EXPORT_PAGE_SIZE = 1000
#: Memories embedded and written per import transaction.
DEFAULT_IMPORT_BATCH = 200


class Progress(Protocol):
    """Where long runs report how far they are (the CLI draws a bar)."""

    def start(self, total: int) -> None: ...

    def advance(self, count: int) -> None: ...


@dataclass(frozen=True)
class ExportSummary:
    users: int
    memories: int
    relations: int


@dataclass
class ImportSummary:
    users_created: list[str] = field(default_factory=list)
    inserted: int = 0
    #: Already in the store (an earlier run, or the store the file came from).
    already_present: int = 0
    #: Active memories whose text the account already holds as another memory.
    duplicates: int = 0
    #: Inserted under a fresh id because another memory held theirs.
    renumbered: int = 0
    relations: int = 0
    #: Centroids dropped because this store embeds with another model.
    centroids_cleared: int = 0


# --- export ------------------------------------------------------------------


async def export_store(
    pool: AsyncConnectionPool,
    write: Callable[[str], Any],
    *,
    username: str | None = None,
    page_size: int = EXPORT_PAGE_SIZE,
    progress: Progress | None = None,
    keyring: Keyring | None = None,
) -> ExportSummary:
    """Write the header and every memory of ``username`` (None: every account) as lines.

    Sealed rows (docs/at-rest.md) are opened with their users' keys from ``keyring``:
    the export is the users' own plain JSON; without the keys they are refused.
    """
    if keyring is None:  # a sealed row is then refused, naming the missing keys
        return await _export(pool, write, username, page_size, progress)
    readable = {}
    async with pool.connection() as conn:
        for user_id in await sealing_move.sealed_users(conn, username):
            readable[user_id] = await keyring.user_keys(user_id, create=False)
    with sealing_as(Scope(None, seal_writes=False, readable=readable)):
        return await _export(pool, write, username, page_size, progress)


async def _export(
    pool: AsyncConnectionPool,
    write: Callable[[str], Any],
    username: str | None,
    page_size: int,
    progress: Progress | None,
) -> ExportSummary:
    async with pool.connection() as conn, conn.transaction():
        await store.begin_snapshot(conn)
        counts = await store.user_counts(conn, username)
        if username is not None and not counts:
            raise invalid(f"There is no account named {username!r}.", field="user")
        users = tuple(UserEntry(c.username, c.memories, c.relations) for c in counts)
        header = Header(
            exported_at=datetime.now(UTC),
            scope="user" if username is not None else "all-users",
            memories=sum(u.memories for u in users),
            relations=sum(u.relations for u in users),
            max_memory_id=await store.max_memory_id(conn, username),
            users=users,
        )
        write(header_line(header) + "\n")
        if progress is not None:
            progress.start(header.memories)
        after = 0
        while True:
            page = await store.memory_page(conn, after_id=after, limit=page_size, username=username)
            if not page:
                break
            edges: dict[int, list[RelationRecord]] = defaultdict(list)
            for edge in await store.relations_of(conn, [m.row.id for m in page]):
                edges[edge.memory_id].append(
                    RelationRecord(edge.subject, edge.predicate, edge.object, edge.created_at)
                )
            write("".join(record_line(_record(m, edges[m.row.id])) + "\n" for m in page))
            after = page[-1].row.id
            if progress is not None:
                progress.advance(len(page))
    return ExportSummary(users=len(users), memories=header.memories, relations=header.relations)


def _record(m: store.ExportedMemory, edges: list[RelationRecord]) -> MemoryRecord:
    centroid = None
    if m.context_centroid is not None:
        # float32 -> Python float is exact, and so is the way back.
        vector = m.context_centroid
        vector = vector.to_numpy() if hasattr(vector, "to_numpy") else vector  # pgvector's Vector
        centroid = np.asarray(vector, dtype=np.float32).tolist()
    return MemoryRecord(
        user=m.username, memory=m.row, context_centroid=centroid, relations=tuple(edges)
    )


def _target_names(
    header: Header, into_user: str | None, username_rule: Callable[[str], str] | None
) -> dict[str, str]:
    """The account each of the file's usernames goes to in this store."""
    rule = username_rule or (lambda name: name)
    if into_user is not None:
        if len(header.users) != 1:
            raise invalid(
                f"--user puts one account's memories into another, but this file holds "
                f"{len(header.users)} accounts; export one with `ownsona export --user NAME`.",
                field="user",
            )
        return {header.users[0].username: rule(into_user)}
    names = {u.username: rule(u.username) for u in header.users}
    if len(set(names.values())) != len(names):
        raise invalid("Two accounts in the file map to one account name in this store.")
    return names


# --- import: writing -----------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    """What to do with each record of a batch, decided against the store."""

    #: file id -> id of the row already in the store that is this memory.
    present: dict[int, int]
    #: file id -> id of the active row whose text this active memory repeats.
    duplicate: dict[int, int]
    #: Records to write, in file order.
    insert: list[MemoryRecord]
    #: File ids among ``insert`` that another memory holds here.
    taken: set[int]


@dataclass
class _Run:
    pool: AsyncConnectionPool
    embedder: Embedder
    user_ids: dict[str, int]
    summary: ImportSummary
    #: file id -> id in this store, for every memory that is not at its own id.
    moved: dict[int, int] = field(default_factory=dict)
    #: Store ids of every memory of the file handled so far.
    final_ids: list[int] = field(default_factory=list)
    #: Each account's keys when the import seals (docs/at-rest.md); empty: plain rows.
    keys: dict[int, UserKeys] = field(default_factory=dict)


def _md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def _text_keys(run: _Run, record: MemoryRecord) -> list[str]:
    """The digests of ``normalized_text`` a row holding this record's text may have.

    A plain row stores the normalized text; a sealed one its keyed hash. A sealing
    store holds both kinds until ``ownsona seal`` has run, so both are probed.
    """
    normalized = normalize_text(record.memory.text)
    keys = run.keys.get(run.user_ids[record.user])
    if keys is None:
        return [_md5(normalized)]
    return [_md5(normalized), _md5(keys.keyed(TEXT, normalized))]


async def _plan(conn: AsyncConnection, run: _Run, records: list[MemoryRecord]) -> _Plan:
    by_id = {r.id: r for r in await store.rows_by_id(conn, [rec.memory.id for rec in records])}
    present: dict[int, int] = {}
    taken: set[int] = set()
    rest: list[MemoryRecord] = []
    for rec in records:
        uid = run.user_ids[rec.user]
        row = by_id.get(rec.memory.id)
        if row is not None and row.user_id == uid and row.created_at == rec.memory.created_at:
            present[rec.memory.id] = rec.memory.id
            continue
        if row is not None:
            taken.add(rec.memory.id)
        rest.append(rec)
    # Where another memory holds the id, an earlier run stored this one under a
    # fresh id: find it by account, creation time and text.
    births = await store.rows_by_birth(
        conn,
        [
            (run.user_ids[r.user], r.memory.created_at, key)
            for r in rest
            if r.memory.id in taken
            for key in _text_keys(run, r)
        ],
    )
    by_birth = {(b.user_id, b.created_at, b.text_md5): b.id for b in births}
    candidates: list[MemoryRecord] = []
    for rec in rest:
        found = None
        if rec.memory.id in taken:
            born = [
                (run.user_ids[rec.user], rec.memory.created_at, k) for k in _text_keys(run, rec)
            ]
            found = next((by_birth[b] for b in born if b in by_birth), None)
        if found is not None:
            present[rec.memory.id] = found
        else:
            candidates.append(rec)
    # The store's rule: one active row per account and normalised text.
    active = [r for r in candidates if r.memory.deleted_at is None]
    holders = await store.active_by_text(
        conn, [(run.user_ids[r.user], key) for r in active for key in _text_keys(run, r)]
    )
    held = {(h.user_id, h.text_md5): h.id for h in holders}
    duplicate: dict[int, int] = {}
    insert: list[MemoryRecord] = []
    for rec in candidates:
        if rec.memory.deleted_at is None:
            texts = [(run.user_ids[rec.user], k) for k in _text_keys(run, rec)]
            holder = next((held[t] for t in texts if t in held), None)
            if holder is not None:
                duplicate[rec.memory.id] = holder
                continue
            for text in texts:  # a later line of this batch repeating it is a duplicate
                held[text] = rec.memory.id
        insert.append(rec)
    return _Plan(present, duplicate, insert, taken & {r.memory.id for r in insert})


def _restored(
    run: _Run, rec: MemoryRecord, new_id: int, vector: np.ndarray
) -> store.RestoredMemory:
    embedder = run.embedder
    centroid: Any = None
    context_count = 0
    same_space = (rec.memory.embedding_provider, rec.memory.embedding_model) == (
        embedder.provider,
        embedder.model,
    )
    if rec.context_centroid is not None and same_space and len(rec.context_centroid) == len(vector):
        centroid = np.asarray(rec.context_centroid, dtype=np.float32)
        context_count = rec.memory.context_count
    row = replace(
        rec.memory,
        id=new_id,
        user_id=run.user_ids[rec.user],
        embedding_provider=embedder.provider,
        embedding_model=embedder.model,
        context_count=context_count,
    )
    return store.RestoredMemory(
        row=row,
        normalized_text=normalize_text(row.text),
        embedding=vector,
        context_centroid=centroid,
    )


async def _embed(run: _Run, records: list[MemoryRecord]) -> dict[int, np.ndarray]:
    if not records:
        return {}
    vectors = await run.embedder.embed([r.memory.text for r in records])
    return {r.memory.id: vectors[i] for i, r in enumerate(records)}


async def _write_batch(
    run: _Run, records: list[MemoryRecord], vectors: dict[int, np.ndarray]
) -> None:
    """Plan again under the import lock and write the batch in one transaction."""
    async with run.pool.connection() as conn, conn.transaction():
        await store.lock_import(conn)
        plan = await _plan(conn, run, records)
        # Rows a concurrent delete made absent since the first plan need vectors too.
        missing = [r for r in plan.insert if r.memory.id not in vectors]
        vectors = {**vectors, **await _embed(run, missing)}
        fresh = iter(await store.next_memory_ids(conn, len(plan.taken)))
        final = {
            r.memory.id: (next(fresh) if r.memory.id in plan.taken else r.memory.id)
            for r in plan.insert
        }
        rows = [_restored(run, r, final[r.memory.id], vectors[r.memory.id]) for r in plan.insert]
        if run.keys:  # sealed, bound to the ids just settled
            rows = await store.seal_restored(conn, run.keys, rows)
        await store.copy_memories(conn, rows)
        edges = [
            store.RestoredRelation(
                memory_id=final[r.memory.id],
                subject=e.subject,
                predicate=e.predicate,
                object=e.object,
                created_at=e.created_at,
                user_id=run.user_ids[r.user],
            )
            for r in plan.insert
            for e in r.relations
        ]
        await store.insert_relations(conn, edges, run.keys or None)
        # An import has no relay of its own: what it owes (memories that
        # came without edges) is for the next sweep, not after the grace.
        await store.imported_extractions_due(conn, list(final.values()))
    # Committed: account for it.
    summary = run.summary
    summary.inserted += len(rows)
    summary.renumbered += len(plan.taken)
    summary.already_present += len(plan.present)
    summary.centroids_cleared += sum(
        1
        for rec, row in zip(plan.insert, rows, strict=True)
        if (rec.context_centroid is not None or rec.memory.context_count)
        and row.context_centroid is None
    )
    summary.duplicates += len(plan.duplicate)
    summary.relations += len(edges)
    for old, new in [*final.items(), *plan.present.items(), *plan.duplicate.items()]:
        run.final_ids.append(new)
        if old != new:
            run.moved[old] = new


async def _ensure_users(run: _Run, names: dict[str, str]) -> None:
    async with run.pool.connection() as conn, conn.transaction():
        for file_name, name in names.items():
            row = await user_store.get_user_by_username(conn, name)
            if row is None:
                row = await user_store.insert_user(conn, name, NO_PASSWORD_HASH)
                if row is None:  # created meanwhile by someone else
                    row = await user_store.get_user_by_username(conn, name)
                else:
                    run.summary.users_created.append(name)
            assert row is not None
            run.user_ids[file_name] = row.id


async def import_store(
    pool: AsyncConnectionPool,
    embedder: Embedder,
    path: Path,
    *,
    into_user: str | None = None,
    batch_size: int = DEFAULT_IMPORT_BATCH,
    username_rule: Callable[[str], str] | None = None,
    progress: Progress | None = None,
    keyring: Keyring | None = None,
) -> ImportSummary:
    """Restore the backup at ``path``; see the module docstring for the rules.

    ``username_rule`` normalises (and may refuse) account names the way
    accounts are stored; ``into_user`` puts a one-account file into that
    account instead. Raises INVALID_INPUT, naming the line, for a bad file.
    ``keyring``: the rows are written sealed with their users' keys (made for an
    account's first sealed row); None: plain rows.
    """
    if batch_size < 1:
        raise invalid("The batch size must be at least 1.", field="batch_size")
    header = check_file(path)
    names = _target_names(header, into_user, username_rule)
    run = _Run(pool=pool, embedder=embedder, user_ids={}, summary=ImportSummary())
    await _ensure_users(run, names)
    if keyring is not None:
        run.keys = {uid: await keyring.user_keys(uid) for uid in set(run.user_ids.values())}
    if header.max_memory_id > 0:
        async with pool.connection() as conn:
            await store.advance_memory_ids(conn, header.max_memory_id)
    if progress is not None:
        progress.start(header.memories)
    # Embedding batch k+1 overlaps writing batch k; the write plans again under
    # the lock, so what the early plan missed (batch k's rows) is still caught.
    pending: tuple[list[MemoryRecord], asyncio.Task[dict[int, np.ndarray]]] | None = None
    try:
        for records in _batches(path, batch_size, header.version):
            async with pool.connection() as conn:
                plan = await _plan(conn, run, records)
            previous, pending = pending, (records, asyncio.ensure_future(_embed(run, plan.insert)))
            if previous is not None:
                await _write_batch(run, previous[0], await previous[1])
                if progress is not None:
                    progress.advance(len(previous[0]))
        if pending is not None:
            await _write_batch(run, pending[0], await pending[1])
            if progress is not None:
                progress.advance(len(pending[0]))
            pending = None
    finally:
        if pending is not None:
            pending[1].cancel()
    if run.moved:
        async with pool.connection() as conn, conn.transaction():
            await store.remap_replaced_by(conn, run.final_ids, run.moved)
    return run.summary
