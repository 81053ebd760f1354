"""Migrations: applied once each, in order; newer or mismatched databases refused."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from psycopg import sql

from storage.errors import StorageError
from storage.migrate import migrate
from storage.schema import available_migrations


@pytest.fixture
def fresh_dsn(dsn: str):
    """An empty database beside the test database, dropped afterwards."""
    name = f"mig_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield dsn.replace("/ownsona_test", f"/{name}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _versions(url: str) -> list[int]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY version")]


async def test_applies_every_migration_once(fresh_dsn):
    applied = await migrate(fresh_dsn, dimensions=384)
    assert applied == [m.version for m in available_migrations()]
    assert await migrate(fresh_dsn, dimensions=384) == []
    assert _versions(fresh_dsn) == applied


async def test_refuses_a_database_newer_than_the_code(fresh_dsn):
    await migrate(fresh_dsn, dimensions=384)
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_version (version, name) VALUES (9999, 'from the future')")
    with pytest.raises(StorageError, match="newer than this code"):
        await migrate(fresh_dsn, dimensions=384)


async def test_refuses_another_embedding_dimension(fresh_dsn):
    await migrate(fresh_dsn, dimensions=384)
    with pytest.raises(StorageError, match="384-dimension"):
        await migrate(fresh_dsn, dimensions=768)
