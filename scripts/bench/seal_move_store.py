"""The store ``seal_move`` seals: a plain store seeded fast, and what is checked after the move.

Seeding writes what an unsealed deployment holds, straight into PostgreSQL: the
memories by binary ``COPY`` (random unit vectors, ``corpus.facts`` texts, tags,
metadata on some rows, tombstones with a reason on others) with the secondary
indexes dropped and rebuilt, as ``tenants.py`` does; the term statistics are
counted by the statements' own path (the previous release's triggers on one node,
``terms.recount`` where none ran). Then relation edges, write receipts, a console
upload and a recorded audit query, each plain. :data:`MARKER` is written plain in
a text, a tag, a metadata value, a forget reason, an edge, a receipt, an upload
and a query: after the move no table may show it.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.types.json import Jsonb

from memory.rules.text import normalize_text
from storage import terms
from storage.migrate import migrate

from . import corpus
from .database import copy_memories
from .tenants_citus import count_terms_if_missing

#: Written plain before the move; found in no table's plain columns after it.
MARKER = "quokkamarkerzq"
#: The local model's dimension and name (rows the server will not re-embed).
DIMENSIONS = 384
MODEL = "all-MiniLM-L6-v2-onnx-int8"
#: Rows per COPY statement.
_COPY_CHUNK = 20_000
#: Every how many rows: metadata, a tombstone, an edge, a receipt.
_EVERY_METADATA, _EVERY_TOMBSTONE, _EVERY_EDGE, _EVERY_RECEIPT = 7, 50, 20, 10
#: When the seeded tombstones were forgotten.
_FORGOTTEN_AT = datetime(2025, 1, 1, tzinfo=UTC)
#: Extra COPY columns (after ``database.SEED_COLUMNS``).
_EXTRA = (("metadata", "jsonb"), ("deleted_at", "timestamptz"), ("forget_reason", "text"))


@dataclass
class Seeded:
    """Who holds what: user ids by name, and the rows the marker sits in."""

    users: dict[str, int]
    rows: int
    #: The marker's memory rows: name -> (user name, memory id).
    marker_rows: dict[str, tuple[str, int]] = field(default_factory=dict)


def layout(memories: int, users: int) -> dict[str, int]:
    """Half the rows to one large user (``bench``, the server's login), the rest spread."""
    big = memories // 2
    rest = memories - big
    small = [rest // (users - 1) + (1 if i < rest % (users - 1) else 0) for i in range(users - 1)]
    return {"bench": big, **{f"seal-{i + 1}": n for i, n in enumerate(small)}}


def seed(dsn: str, counts: dict[str, int], rng: np.random.Generator) -> Seeded:
    """Fill a new database with ``counts`` (username -> memories), all plain."""
    asyncio.run(migrate(dsn, dimensions=DIMENSIONS))
    texts = list(corpus.facts(max(counts.values())))
    with psycopg.connect(dsn) as conn:
        register_vector(conn)
        users = {
            name: int(
                conn.execute(  # type: ignore[index]
                    "INSERT INTO users (username, password_hash) VALUES (%s, 'x') RETURNING id",
                    (name,),
                ).fetchone()[0]
            )
            for name in counts
        }
        indexes = _drop_indexes(conn)
        owner = np.repeat(np.array(list(users.values())), list(counts.values()))
        rank = np.concatenate([np.arange(n) for n in counts.values()])
        ends = {users["bench"]: "first", max(users.values()): "last"}
        order = rng.permutation(len(owner))  # the users' rows interleaved, as writes leave them
        for start in range(0, len(order), _COPY_CHUNK):
            part = order[start : start + _COPY_CHUNK]
            vectors = rng.normal(size=(len(part), DIMENSIONS)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            with copy_memories(conn, _EXTRA) as copy:
                for i, vector in zip(part, vectors, strict=True):
                    user_id, n = int(owner[i]), int(rank[i])
                    mark = MARKS.get((ends.get(user_id, ""), n), "")
                    copy.write_row(_row(user_id, n, texts, vector, mark))
            conn.commit()
        for definition in indexes:
            conn.execute("SET maintenance_work_mem = '512MB'")
            conn.execute(definition)
            conn.commit()
        seeded = Seeded(users, len(owner))
        _marker_rows(conn, seeded)
        _around(conn)
        conn.commit()
    count_terms_if_missing(dsn, list(users.values()))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    return seeded


def _drop_indexes(conn: psycopg.Connection[Any]) -> list[str]:
    """Drop every index of memories but the keys' (as tenants.py); their definitions."""
    indexes = conn.execute(
        "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x"
        " JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = 'memories'::regclass"
        " AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)"
    ).fetchall()
    for name, _ in indexes:
        conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(name)))
    conn.commit()
    return [str(d) for _, d in indexes]


def _row(user_id: int, rank: int, texts: list[str], vector: np.ndarray, mark: str) -> list[Any]:
    """One COPY row; ``mark`` (a :data:`MARKS` key, or '') puts :data:`MARKER` in it."""
    text, tags = texts[rank], ["bench", f"topic-{rank % 9}"]
    metadata: dict[str, Any] = (
        {"source": "seed", "rank": rank} if rank % _EVERY_METADATA == 0 else {}
    )
    tombstone = rank % _EVERY_TOMBSTONE == _EVERY_TOMBSTONE - 1
    reason = f"outdated note {rank}" if tombstone else None
    if mark in ("text_tags_metadata", "updated_mid_move"):
        text, tags = f"{text} My doctor is {MARKER}.", [*tags, MARKER]
    if mark == "text_tags_metadata":
        metadata = {"doctor": MARKER}
    if mark == "forget_reason":
        tombstone, reason = True, f"{MARKER} moved away"
    return [
        user_id,
        text,
        normalize_text(text),
        vector,
        "local",
        MODEL,
        tags,
        Jsonb(metadata),
        _FORGOTTEN_AT if tombstone else None,
        reason,
    ]


#: Where the marker goes: (first user or last, row rank) -> what it marks. The last
#: user is the one the move reaches last; ``updated_mid_move`` is edited while it runs.
MARKS = {
    ("first", 0): "text_tags_metadata",
    ("last", 0): "updated_mid_move",
    ("last", 1): "forget_reason",
}


def _marker_rows(conn: psycopg.Connection[Any], seeded: Seeded) -> None:
    """Note which row holds each mark (by its user and its text's or reason's marker)."""
    rows = conn.execute(
        "SELECT u.username, m.id, m.deleted_at IS NOT NULL FROM memories m"
        " JOIN users u ON u.id = m.user_id WHERE m.text LIKE %(p)s OR m.forget_reason LIKE %(p)s",
        {"p": f"%{MARKER}%"},
    ).fetchall()
    for username, memory_id, deleted in rows:
        if deleted:
            mark = "forget_reason"
        else:
            mark = "text_tags_metadata" if username == "bench" else "updated_mid_move"
        seeded.marker_rows[mark] = (str(username), int(memory_id))


def _around(conn: psycopg.Connection[Any]) -> None:
    """Plain edges, receipts, an upload and a recorded query; the marker in one of each."""
    conn.execute(
        "INSERT INTO memory_relations (user_id, memory_id, subject, predicate, object)"
        " SELECT user_id, id, 'I', 'wrote about', left(text, 40) FROM memories"
        " WHERE id %% %s = 0",
        (_EVERY_EDGE,),
    )
    conn.execute(
        "INSERT INTO memory_relations (user_id, memory_id, subject, predicate, object)"
        " SELECT user_id, id, 'my doctor', 'is named', %s FROM memories"
        " WHERE id = (SELECT min(id) FROM memories)",
        (MARKER,),
    )
    conn.execute(
        "INSERT INTO write_receipts (user_id, idempotency_key, tool, result, memory_ids)"
        " SELECT user_id, 'seed-' || id, 'remember',"
        " jsonb_build_object('ok', true, 'memory_id', id, 'text', text), ARRAY[id]"
        " FROM memories WHERE id %% %s = 0",
        (_EVERY_RECEIPT,),
    )
    first = conn.execute("SELECT min(id) FROM users").fetchone()
    assert first is not None
    conn.execute(
        "INSERT INTO write_receipts (user_id, idempotency_key, tool, result)"
        " VALUES (%s, 'seed-marker', 'remember', %s)",
        (first[0], Jsonb({"ok": True, "text": f"my doctor is {MARKER}"})),
    )
    conn.execute(
        "INSERT INTO console_uploads (id, user_id, filename, export) VALUES ('seed-upload', %s,"
        " %s, %s)",
        (first[0], f"{MARKER}.json", Jsonb([{"title": MARKER}])),
    )
    conn.execute(
        "INSERT INTO audit_events (user_id, entry, tool, ok, query) VALUES"
        " (%s, 'mcp', 'recall', true, %s)",
        (first[0], f"who is {MARKER}"),
    )
    conn.execute("DELETE FROM relation_outbox")  # the seeded rows' extraction ran long ago


# --- after the move -------------------------------------------------------------------


def plain_left(dsn: str) -> dict[str, int]:
    """Rows still holding plain user content, per kind (all 0 once sealed)."""
    checks = {
        "memories": "SELECT count(*) FROM memories WHERE text_sealed IS NULL",
        "memories_half_sealed": "SELECT count(*) FROM memories WHERE text_sealed IS NOT NULL"
        " AND (tags_sealed IS NULL OR text <> '' OR forget_reason IS NOT NULL"
        " OR (metadata <> '{}' AND metadata_sealed IS NULL))",
        "memory_relations": "SELECT count(*) FROM memory_relations WHERE subject_sealed IS NULL",
        "write_receipts": "SELECT count(*) FROM write_receipts WHERE result_sealed IS NULL",
        "console_uploads": "SELECT count(*) FROM console_uploads WHERE export_sealed IS NULL",
        "audit_events": "SELECT count(*) FROM audit_events"
        " WHERE query IS NOT NULL AND query_sealed IS NULL",
    }
    with psycopg.connect(dsn) as conn:
        return {
            name: int(conn.execute(query).fetchone()[0])  # type: ignore[index]
            for name, query in checks.items()
        }


def marker_hits(dsn: str) -> dict[str, int]:
    """Rows of each table whose text form shows :data:`MARKER` (only tables with hits)."""
    with psycopg.connect(dsn) as conn:
        tables = [
            str(r[0])
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
            )
        ]
        hits = {}
        for table in tables:
            row = conn.execute(
                sql.SQL("SELECT count(*) FROM {} t WHERE t::text ILIKE %s").format(
                    sql.Identifier(table)
                ),
                (f"%{MARKER}%",),
            ).fetchone()
            if row is not None and row[0]:
                hits[table] = int(row[0])
    return hits


def statistics_off(dsn: str, user_ids: list[int]) -> list[int]:
    """Users whose term statistics differ from a recount of their rows (rolled back)."""

    async def run() -> list[int]:
        off = []
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            for user_id in user_ids:
                before = await _counts(conn, user_id)
                await terms.recount(conn, user_id)
                if await _counts(conn, user_id) != before:
                    off.append(user_id)
                await conn.rollback()
        return off

    return asyncio.run(run())


async def _counts(conn: psycopg.AsyncConnection[Any], user_id: int) -> tuple[Any, ...]:
    cur = await conn.execute(
        "SELECT term, docs FROM memory_terms WHERE user_id = %s ORDER BY term", (user_id,)
    )
    rows = await cur.fetchall()
    cur = await conn.execute("SELECT docs FROM memory_term_totals WHERE user_id = %s", (user_id,))
    return tuple(rows), await cur.fetchone()


def exported(lines: list[str]) -> dict[int, dict[str, Any]]:
    """An ``ownsona export`` (JSON Lines) by memory id: what a check compares."""
    out = {}
    for line in lines[1:]:
        record = json.loads(line)
        out[int(record["id"])] = {
            "user": record["user"],
            "text": record["text"],
            "tags": record["tags"],
            "metadata": record["metadata"],
            "deleted": record["deleted_at"] is not None,
            "forget_reason": record["forget_reason"],
            "relations": sorted(
                (r["subject"], r["predicate"], r["object"]) for r in record["relations"]
            ),
        }
    return out
