"""Storage fixtures: a migrated primary + streaming standby, built once per module that asks."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.migrate import migrate
from tests.conftest import TEST_DIMENSIONS

from .pg_pair import Server, make_primary, make_standby, wait_until


def caught_up(primary: Server, standby: Server) -> bool:
    """The standby has replayed everything the primary has written so far."""
    target = primary.sql("SELECT pg_current_wal_lsn()::text")
    return bool(standby.sql(f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn"))


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[Server, Server]]:
    root = Path(tempfile.mkdtemp(prefix="ownsona-pair-"))
    root.chmod(0o755)  # the servers run as the wheel's user (as root)
    servers: list[Server] = []
    try:
        primary = make_primary(root)
        servers.append(primary)
        asyncio.run(migrate(primary.url(), dimensions=TEST_DIMENSIONS))
        standby = make_standby(primary, root)
        servers.append(standby)
        wait_until("the standby to catch up", lambda: caught_up(primary, standby))
        yield primary, standby
    finally:
        for server in servers:
            with contextlib.suppress(Exception):  # a killed server has nothing to stop
                server.stop()
        if not os.environ.get("OWNSONA_KEEP_PAIR"):
            shutil.rmtree(root, ignore_errors=True)
