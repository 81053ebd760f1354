"""X-Forwarded-For is believed only from the proxies FORWARDED_ALLOW_IPS names.

The sign-in throttle counts failures per client address (auth.throttle). If
any client could name its own address, it could dodge the per-address limit
or lock someone else out; so ``ownsona serve`` ignores the header unless the
operator says which proxy sets it.
"""

from __future__ import annotations

import psycopg
import pytest

from tests.e2e.server import run_processes
from tests.ops.lifecycle_helpers import failed_sign_in

SPOOFED = "203.0.113.77"


@pytest.fixture
def no_failures(clean_db: str) -> str:
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("TRUNCATE oauth_login_failures, oauth_clients RESTART IDENTITY CASCADE")
    return clean_db


def _addresses(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute("SELECT address FROM oauth_login_failures ORDER BY id")]


def test_a_spoofed_forwarded_for_is_ignored_by_default(no_failures, tmp_path):
    with run_processes(tmp_path, {"DATABASE_URL": no_failures}) as server:
        failed_sign_in(server.url, SPOOFED)
    assert _addresses(no_failures) == ["127.0.0.1"]


def test_the_forwarded_address_counts_behind_a_configured_proxy(no_failures, tmp_path):
    # Our test client connects from 127.0.0.1: it plays the trusted reverse proxy.
    env = {"DATABASE_URL": no_failures, "FORWARDED_ALLOW_IPS": "127.0.0.1"}
    with run_processes(tmp_path, env) as server:
        failed_sign_in(server.url, f"{SPOOFED}, 127.0.0.1")
    assert _addresses(no_failures) == [SPOOFED]
