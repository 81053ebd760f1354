"""The audit log of tool calls: every entry point records here (issue 15).

A record says when, which entry point (``mcp``, ``stdio``, ``console``,
``cli``) and app (client id, token), which tool, which memory ids it read
or changed, and the outcome. Never memory text; a read's query text only
when ``AUDIT_RECORD_QUERIES`` is on (the owner's own debugging).

Records are buffered and written in batches by one background task (a COPY
every :data:`FLUSH_EVERY_S`, or sooner at :data:`FLUSH_AT`), so a tool call
pays for appending to a list, not for a database round trip. What is
buffered when the process is killed outright is lost; :meth:`AuditLog.close`
writes it on an orderly stop. :meth:`flush` writes at once (a page that shows
the log calls it first, so the owner sees their own latest calls). Once a day
the task deletes records older than ``AUDIT_RETENTION_DAYS``.

Sealed at rest: with ``OWNSONA_SEAL_MEMORIES`` and a keyring, a recorded query is
sealed under its user's data key when written (docs/at-rest.md); the console's
activity page opens it with the owner's keys (:func:`events` with their scope).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import psycopg

from config.settings import Settings
from memory.rules.audit_ids import touched
from storage import audit as store
from storage.sealing.errors import DataKeyGone
from storage.sealing.scope import Scope, sealing_as
from storage.sealing.user_keys import UserKeys

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from memory.keyring import Keyring

logger = logging.getLogger("ownsona.memory.audit")

FLUSH_EVERY_S = 0.5
FLUSH_AT = 200
PRUNE_EVERY_S = 24 * 3600
#: Characters of a query kept when queries are recorded.
MAX_QUERY_CHARS = 500
#: Records kept in memory while the database cannot take them; older ones are dropped.
MAX_BUFFERED = 50_000
#: A record as read back (the console's activity page shows these).
AuditEventRow = store.AuditEventRow
#: Which records a page of them lists.
EventFilter = store.EventFilter
#: The ``client_id`` of the records an ``ownsona`` command (export, import, ...) writes.
COMMAND_CLIENT_ID = "ownsona-cli-command"


class AuditLog:
    def __init__(
        self,
        pool: AsyncConnectionPool,
        settings: Settings,
        *,
        background: bool = True,
        keyring: Keyring | None = None,
    ) -> None:
        """``background=False``: no writer task; records are written by :meth:`flush` and
        :meth:`close` only (an app nobody opens or closes: ``create_app`` without a
        process around it, in tests, where a writer left running past its test would
        hold a transaction on the audit table while the next test empties the tables).
        ``keyring``: recorded queries are sealed with it when memories are sealed."""
        self._pool = pool
        self._keyring = keyring if settings.seal_memories else None
        self._background = background
        self._retention = timedelta(days=settings.audit_retention_days)
        self._record_queries = settings.audit_record_queries
        self._buffer: list[store.NewAuditEvent] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._next_prune = 0.0
        self._closed = False

    def record(
        self,
        *,
        user_id: int,
        entry: str,
        client_id: str | None,
        token_jti: str | None,
        tool: str,
        read_only: bool,
        arguments: dict[str, Any],
        payload: dict[str, Any],
        duration_s: float,
    ) -> None:
        """Buffer one call's record; never raises, never waits."""
        try:
            read_ids, changed_ids = touched(arguments, payload, read_only=read_only)
            error = payload.get("error") if payload.get("ok") is not True else None
            code = error.get("code") if isinstance(error, dict) else None
            query = None
            if self._record_queries and read_only and isinstance(arguments.get("query"), str):
                query = arguments["query"][:MAX_QUERY_CHARS]
            self._append(
                store.NewAuditEvent(
                    user_id=user_id,
                    at=datetime.now(UTC),
                    entry=entry,
                    client_id=client_id,
                    token_jti=token_jti,
                    tool=tool,
                    ok=payload.get("ok") is True,
                    error_code=code if isinstance(code, str) else None,
                    read_ids=read_ids,
                    changed_ids=changed_ids,
                    query=query,
                    duration_ms=duration_s * 1000,
                )
            )
        except Exception as ex:  # the call's answer matters more than its record
            logger.error("audit record of %s failed", tool, exc_info=ex)

    def _append(self, event: store.NewAuditEvent) -> None:
        if len(self._buffer) >= MAX_BUFFERED:
            del self._buffer[: len(self._buffer) // 10]
            logger.error("audit buffer full: the oldest unwritten records were dropped")
        self._buffer.append(event)
        if self._background and self._task is None and not self._closed:
            self._task = asyncio.get_running_loop().create_task(self._run())
        if len(self._buffer) in (1, FLUSH_AT):
            self._wake.set()

    async def flush(self) -> None:
        """Write what is buffered now; raises when the database cannot be reached."""
        async with self._lock:
            batch, self._buffer = self._buffer, []
            if not batch:
                return
            try:
                await self._insert(batch)
            except (psycopg.OperationalError, asyncio.CancelledError):
                # Kept for the next flush: an outage, or a stop cancelling the write (its
                # transaction rolled back), does not lose the records.
                self._buffer[:0] = batch
                raise
            except psycopg.Error:
                # One record the database refuses for good (its account deleted meanwhile)
                # must not sink the others: one by one, dropping only what is refused.
                for i, event in enumerate(batch):
                    try:
                        await self._insert([event])
                    except psycopg.OperationalError:
                        self._buffer[:0] = batch[i:]
                        raise
                    except psycopg.Error as ex:
                        logger.error(
                            "audit log: a record of %s refused and dropped", event.tool, exc_info=ex
                        )

    async def catch_up(self) -> None:
        """:meth:`flush` for a page about to show the log: a failure is logged, not raised
        (the page shows what is already written)."""
        try:
            await self.flush()
        except Exception as ex:
            logger.warning("audit log not caught up (%s)", type(ex).__name__)

    async def _insert(self, events: list[store.NewAuditEvent]) -> None:
        keys, gone = await self._sealing_keys(events)
        if gone:  # their queries are dropped, never written plain
            events = [replace(e, query=None) if e.user_id in gone else e for e in events]
        async with self._pool.connection() as conn, conn.transaction():
            await store.insert_events(conn, events, keys)

    async def _sealing_keys(
        self, events: list[store.NewAuditEvent]
    ) -> tuple[dict[int, UserKeys], set[int]]:
        """The keys of the users whose recorded queries this batch seals (none: unsealed),
        and the users with no data key.

        Never a new data key (the call that made the query already made it), so a record
        of a user deleted since is not given one (the insert refuses it: no such user).
        """
        keys: dict[int, UserKeys] = {}
        gone: set[int] = set()
        if self._keyring is None:
            return keys, gone
        for user_id in sorted({e.user_id for e in events if e.query is not None}):
            try:
                keys[user_id] = await self._keyring.user_keys(user_id, create=False)
            except DataKeyGone:
                gone.add(user_id)
        return keys, gone

    async def prune(self, now: datetime | None = None) -> int:
        """Delete the records older than the retention; how many went."""
        cutoff = (now or datetime.now(UTC)) - self._retention
        async with self._pool.connection() as conn:
            removed = await store.prune(conn, cutoff)
        if removed:
            logger.info("audit log: %d records older than %s pruned", removed, cutoff.date())
        return removed

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        try:
            await self.flush()
        except Exception as ex:
            logger.error(
                "audit log: %d records not written at shutdown", len(self._buffer), exc_info=ex
            )

    async def _run(self) -> None:
        while True:
            # Idle: sleep until a record arrives; then gather a batch for up to FLUSH_EVERY_S.
            await self._wake.wait()
            self._wake.clear()
            if len(self._buffer) < FLUSH_AT:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), FLUSH_EVERY_S)
                self._wake.clear()
            try:
                await self.flush()
                if time.monotonic() >= self._next_prune:
                    self._next_prune = time.monotonic() + PRUNE_EVERY_S
                    await self.prune()
            except Exception as ex:
                logger.warning("audit log write failed (%s); retrying", type(ex).__name__)
                self._wake.set()  # retried after the next gathering wait


async def events(
    pool: AsyncConnectionPool, user_id: int, where: EventFilter, scope: Scope | None = None
) -> list[AuditEventRow]:
    """One user's audit records, newest first (``where.before_id``: the next page); a sealed
    query opened with ``scope``'s keys (``memory.call_keys``), refused without them."""
    with sealing_as(scope):
        async with pool.connection() as conn:
            return await store.list_events(conn, user_id, where)


async def app_activity(pool: AsyncConnectionPool, user_id: int) -> list[store.AppActivity]:
    """Per app: first and last call, calls, distinct memories written."""
    async with pool.connection() as conn:
        return await store.app_activity(conn, user_id)


async def choices(pool: AsyncConnectionPool, user_id: int) -> store.Choices:
    """The apps (client ids) and tools one user's log can be filtered by."""
    async with pool.connection() as conn:
        return await store.choices(conn, user_id)


async def record_command(
    pool: AsyncConnectionPool,
    settings: Settings,
    command: str,
    usernames: Sequence[str] | None,
    *,
    read_only: bool,
    duration_s: float,
) -> int:
    """Record one run of an ``ownsona`` command: one record per account it served.

    ``usernames`` None means every account. The records say ``entry`` cli, the
    app :data:`COMMAND_CLIENT_ID` and the command as the tool; they name no
    memory (a run covers them all). How many were written.
    """
    async with pool.connection() as conn:
        ids = await store.user_ids(conn, usernames)
    log = AuditLog(pool, settings)
    for user_id in ids:
        log.record(
            user_id=user_id,
            entry="cli",
            client_id=COMMAND_CLIENT_ID,
            token_jti=None,
            tool=command,
            read_only=read_only,
            arguments={},
            payload={"ok": True},
            duration_s=duration_s,
        )
    await log.close()
    return len(ids)
