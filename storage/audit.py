"""Audit-log SQL: write a batch of tool-call records, read them back, prune old ones.

Every function takes a connection so the caller owns the transaction.

A recorded query (``AUDIT_RECORD_QUERIES``) is sealed at rest when its user's keys
are given (migration 0025): ``query`` NULL and ``query_sealed`` the query, bound to
(user, event id, ``query``); the event's id is drawn before the COPY for that. A
page of events opens them with the keys in scope (``storage.sealed_values``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime

from psycopg import AsyncConnection, sql
from psycopg.rows import class_row

from storage.sealing.user_keys import UserKeys

from .rows import select_list
from .sealed_values import open_text


@dataclass(frozen=True)
class AuditRecord:
    """What one tool call did, as its audit record keeps it."""

    at: datetime
    entry: str
    client_id: str | None
    token_jti: str | None
    tool: str
    ok: bool
    error_code: str | None
    read_ids: list[int]
    changed_ids: list[int]
    query: str | None
    duration_ms: float


@dataclass(frozen=True)
class NewAuditEvent(AuditRecord):
    """A record to store, for its user."""

    user_id: int


@dataclass(frozen=True)
class AuditEventRow(AuditRecord):
    """A stored record, by its id."""

    id: int


@dataclass(frozen=True)
class _StoredEvent(AuditEventRow):
    """A row as selected: its query sealed or not."""

    query_sealed: bytes | None


#: The column a recorded query is sealed as (the associated data's column name).
_QUERY = "query"
_NEW_FIELDS = tuple(f.name for f in fields(NewAuditEvent))
_COLUMNS = sql.SQL(", ").join(sql.Identifier(name) for name in _NEW_FIELDS)
_SEALED_COLUMNS = sql.SQL(", ").join(
    sql.Identifier(name) for name in ("id", *_NEW_FIELDS, "query_sealed")
)
_ROW_COLUMNS = sql.SQL(select_list(_StoredEvent))


async def insert_events(
    conn: AsyncConnection,
    events: Sequence[NewAuditEvent],
    keys: Mapping[int, UserKeys] | None = None,
) -> None:
    """Store a batch in one COPY (one round trip, whatever its size).

    ``keys``: the users whose recorded queries are sealed; the batch's ids are then
    drawn first (one more round trip), each query sealed for its event's id.
    """
    if not events:
        return
    keys = keys or {}
    sealing = any(e.query is not None and e.user_id in keys for e in events)
    ids: list[int] = []
    if sealing:
        cur = await conn.execute(
            "SELECT ownsona_next_id('audit_events_id_seq'::regclass) FROM generate_series(1, %s)",
            (len(events),),
        )
        ids = [int(r[0]) for r in await cur.fetchall()]
    columns = _SEALED_COLUMNS if sealing else _COLUMNS
    async with (
        conn.cursor() as cur,
        cur.copy(sql.SQL("COPY audit_events ({}) FROM STDIN").format(columns)) as copy,
    ):
        for i, e in enumerate(events):
            if not sealing:
                await copy.write_row([getattr(e, name) for name in _NEW_FIELDS])
                continue
            user_keys = keys.get(e.user_id) if e.query is not None else None
            sealed = None if user_keys is None else user_keys.seal(e.query or "", ids[i], _QUERY)
            stored = e if sealed is None else replace(e, query=None)
            await copy.write_row([ids[i], *(getattr(stored, n) for n in _NEW_FIELDS), sealed])


def _opened(user_id: int, row: _StoredEvent) -> AuditEventRow:
    """The row with its query opened (a sealed one with the keys in scope, or refused)."""
    query = open_text(user_id, row.id, _QUERY, row.query, row.query_sealed)
    values = {f.name: getattr(row, f.name) for f in fields(AuditEventRow)}
    return AuditEventRow(**{**values, "query": query})


@dataclass(frozen=True)
class EventFilter:
    """Which of one user's events a page lists: each set field narrows it."""

    client_id: str | None = None
    tool: str | None = None
    memory_id: int | None = None
    before_id: int | None = None
    limit: int = 50


async def list_events(
    conn: AsyncConnection, user_id: int, where: EventFilter
) -> list[AuditEventRow]:
    """One user's events, newest first; ``before_id`` pages on (keyset).

    The next page starts after the event ``before_id`` in (at, id) order, the
    order of the index; an id that is not this user's gives an empty page.
    """
    async with conn.cursor(row_factory=class_row(_StoredEvent)) as cur:
        await cur.execute(
            sql.SQL(
                """
            SELECT {} FROM audit_events
            WHERE user_id = %(user_id)s
              AND (%(client_id)s::text IS NULL OR client_id = %(client_id)s)
              AND (%(tool)s::text IS NULL OR tool = %(tool)s)
              AND (%(memory_id)s::bigint IS NULL
                   OR changed_ids @> ARRAY[%(memory_id)s::bigint]
                   OR read_ids @> ARRAY[%(memory_id)s::bigint])
              AND (%(before_id)s::bigint IS NULL OR (at, id) < (
                  SELECT b.at, b.id FROM audit_events b
                  WHERE b.id = %(before_id)s AND b.user_id = %(user_id)s))
            ORDER BY at DESC, id DESC
            LIMIT %(limit)s
            """
            ).format(_ROW_COLUMNS),
            {
                "user_id": user_id,
                **asdict(where),
            },
        )
        return [_opened(user_id, row) for row in await cur.fetchall()]


@dataclass(frozen=True)
class AppActivity:
    client_id: str | None
    token_jti: str | None
    first_at: datetime
    last_at: datetime
    calls: int
    #: Distinct memories its successful calls changed.
    memories_written: int


async def app_activity(conn: AsyncConnection, user_id: int) -> list[AppActivity]:
    """Per app (client id, and token for CLI tokens): first and last call, memories changed."""
    async with conn.cursor(row_factory=class_row(AppActivity)) as cur:
        await cur.execute(
            """
            SELECT e.client_id, e.token_jti, min(e.at) AS first_at, max(e.at) AS last_at,
                count(*)::int AS calls,
                (SELECT count(DISTINCT m)::int FROM audit_events w, unnest(w.changed_ids) m
                 WHERE w.user_id = %(user_id)s AND w.ok
                   AND w.client_id IS NOT DISTINCT FROM e.client_id
                   AND (e.client_id <> 'ownsona-cli'
                        OR w.token_jti IS NOT DISTINCT FROM e.token_jti)) AS memories_written
            FROM (
                SELECT client_id,
                    CASE WHEN client_id = 'ownsona-cli' THEN token_jti END AS token_jti, at
                FROM audit_events WHERE user_id = %(user_id)s
            ) e
            GROUP BY e.client_id, e.token_jti
            ORDER BY max(e.at) DESC
            """,
            {"user_id": user_id},
        )
        return await cur.fetchall()


async def prune(conn: AsyncConnection, older_than: datetime) -> int:
    """Delete the records older than ``older_than``; how many went."""
    cur = await conn.execute("DELETE FROM audit_events WHERE at < %s", (older_than,))
    return cur.rowcount


@dataclass(frozen=True)
class Choices:
    """What one user's log can be filtered by."""

    client_ids: list[str]
    tools: list[str]


async def choices(conn: AsyncConnection, user_id: int) -> Choices:
    """The distinct apps (client ids) and tools in one user's log, sorted."""
    cur = await conn.execute(
        """
        SELECT array(SELECT DISTINCT client_id FROM audit_events
                     WHERE user_id = %(u)s AND client_id IS NOT NULL ORDER BY 1),
            array(SELECT DISTINCT tool FROM audit_events WHERE user_id = %(u)s ORDER BY 1)
        """,
        {"u": user_id},
    )
    row = await cur.fetchone()
    assert row is not None
    return Choices(client_ids=list(row[0]), tools=list(row[1]))


async def user_ids(conn: AsyncConnection, usernames: Sequence[str] | None) -> list[int]:
    """The ids of these accounts (None: every account), in id order; unknown names are left out."""
    cur = await conn.execute(
        "SELECT id FROM users WHERE %(names)s::text[] IS NULL OR username = ANY(%(names)s)"
        " ORDER BY id",
        {"names": list(usernames) if usernames is not None else None},
    )
    return [int(r[0]) for r in await cur.fetchall()]
