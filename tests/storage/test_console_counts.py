"""The one-pass counts behind /console/stats agree with their plain definitions.

``storage.memory_reads.store_stats`` counts per tag set and provider first and
sums those groups. It is checked here against the straightforward query on a
store mixed enough to tell them apart: several tag sets sharing tags,
providers, forgotten and expired rows.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from storage import audit, memory_reads
from storage.memory_sql import ACTIVE
from tests.conftest import make_user

#: tags, source_provider, importance, state
ROWS = [
    (["family"], "claude", 0.9, "active"),
    (["family", "music"], "claude", 0.3, "active"),
    (["music", "family"], None, 0.5, "active"),
    ([], "openai", 0.7, "active"),
    (["health"], "openai", 0.2, "forgotten"),
    (["health", "food"], None, 0.6, "expired"),
    (["food"], "(none)", 0.4, "active"),
    (["work"], "claude", 0.8, "forgotten"),
    (["family"], None, 0.1, "expires later"),
]


def _seed(dsn: str, user_id: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for n, (tags, provider, importance, state) in enumerate(ROWS):
            conn.execute(
                """
                INSERT INTO memories (user_id, text, normalized_text, embedding,
                    embedding_provider, embedding_model, tags, source_provider, importance,
                    created_at, deleted_at, expires_at)
                VALUES (%(u)s, %(t)s, %(t)s, array_fill(0.1, ARRAY[384])::vector, 'test',
                    'test', %(tags)s, %(p)s, %(i)s, now() - make_interval(days => %(n)s),
                    CASE WHEN %(s)s = 'forgotten' THEN now() END,
                    CASE %(s)s WHEN 'expired' THEN now() - interval '1 hour'
                               WHEN 'expires later' THEN now() + interval '1 day' END)
                """,
                {
                    "u": user_id,
                    "t": f"fact {n}",
                    "tags": tags,
                    "p": provider,
                    "i": importance,
                    "n": n,
                    "s": state,
                },
            )


async def test_store_stats_agree_with_the_plain_counts(pool, clean_db):
    user_id = make_user(clean_db, "alice")
    other = make_user(clean_db, "bob")
    _seed(clean_db, user_id)
    _seed(clean_db, other)
    async with pool.connection() as conn:
        stats = await memory_reads.store_stats(conn, user_id, top_tags=3)
        row = await (
            await conn.execute(
                f"""
                SELECT count(*), count(*) FILTER (WHERE {ACTIVE}),
                    count(*) FILTER (WHERE deleted_at IS NOT NULL),
                    count(*) FILTER (WHERE deleted_at IS NULL AND expires_at <= now()),
                    avg(importance) FILTER (WHERE {ACTIVE}), min(created_at), max(created_at)
                FROM memories WHERE user_id = %s
                """,
                (user_id,),
            )
        ).fetchone()
        tags = await (
            await conn.execute(
                f"SELECT t.tag, count(*) FROM memories, unnest(tags) AS t(tag)"
                f" WHERE user_id = %s AND {ACTIVE} GROUP BY t.tag ORDER BY 2 DESC, 1 LIMIT 3",
                (user_id,),
            )
        ).fetchall()
        providers = await (
            await conn.execute(
                "SELECT coalesce(source_provider, '(none)'), count(*) FROM memories"
                " WHERE user_id = %s GROUP BY 1 ORDER BY 2 DESC, 1",
                (user_id,),
            )
        ).fetchall()
    assert row is not None
    assert (stats.total, stats.active, stats.soft_deleted, stats.expired) == row[:4]
    assert (stats.total, stats.active, stats.soft_deleted, stats.expired) == (9, 6, 2, 1)
    assert stats.avg_importance == pytest.approx(row[4])
    assert (stats.oldest_created_at, stats.newest_created_at) == row[5:]
    assert [(t.tag, t.count) for t in stats.top_tags] == [tuple(t) for t in tags]
    assert [(t.tag, t.count) for t in stats.top_tags] == [("family", 4), ("music", 2), ("food", 1)]
    assert [(p.provider, p.count) for p in stats.by_provider] == [tuple(p) for p in providers]
    assert [(p.provider, p.count) for p in stats.by_provider] == [
        ("(none)", 4),
        ("claude", 3),
        ("openai", 2),
    ]


async def test_store_stats_of_an_empty_store(pool, clean_db):
    user_id = make_user(clean_db, "alice")
    async with pool.connection() as conn:
        stats = await memory_reads.store_stats(conn, user_id, top_tags=10)
    assert (stats.total, stats.active, stats.soft_deleted, stats.expired) == (0, 0, 0, 0)
    assert stats.avg_importance is None and stats.oldest_created_at is None
    assert stats.top_tags == [] and stats.by_provider == []


def _event(
    user_id: int, client_id: str | None, jti: str | None, changed: list[int], *, ok: bool = True
) -> audit.NewAuditEvent:
    return audit.NewAuditEvent(
        user_id=user_id,
        at=datetime.now(UTC) - timedelta(minutes=len(changed)),
        entry="mcp",
        client_id=client_id,
        token_jti=jti,
        tool="remember",
        ok=ok,
        error_code=None,
        read_ids=[],
        changed_ids=changed,
        query=None,
        duration_ms=1.0,
    )
