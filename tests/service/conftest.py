"""Service-suite fixtures.

The embedded test cluster is a throwaway in a temporary directory, and every test
empties it (``clean_db`` truncates), which leaves many files for the shutdown
checkpoint to fsync. On a busy disk that alone made ``pg_ctl stop`` time out, so
durability is switched off for the throwaway cluster. Never for an external
database given by ``OWNSONA_TEST_DATABASE_URL``.
"""

from __future__ import annotations

import os

import psycopg
import pytest


@pytest.fixture(scope="session", autouse=True)
def _throwaway_cluster_without_fsync(dsn: str) -> None:
    if os.environ.get("OWNSONA_TEST_DATABASE_URL"):
        return
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET fsync = off")
        conn.execute("ALTER SYSTEM SET synchronous_commit = off")
        conn.execute("ALTER SYSTEM SET full_page_writes = off")
        conn.execute("SELECT pg_reload_conf()")
