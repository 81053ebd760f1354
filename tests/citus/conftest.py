"""A Citus cluster (a coordinator and two workers on loopback), once per test session.

The session's ``dsn`` is the coordinator, migrated by ``ownsona migrate``'s code (which
places every table: ``storage.citus_layout``), so the fixtures built on it (``pool``,
``clean_db``, ``deps``, users) and the tests imported from the plain suite run here
unchanged, against Citus. Citus is built from the vendored source the first time
(``scripts.cluster.citus_build``, cached); without gcc and make these tests skip.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from scripts.cluster.citus_build import CitusUnavailable, ensure_built
from scripts.cluster.citus_nodes import CitusCluster
from storage.migrate import migrate
from storage.pool import make_pool
from tests.api.conftest import (  # noqa: F401 (the API fixtures, for the imported tests)
    api_settings,
    keystore,
    runtime,
    token,
    use_cases,
    user_id,
    write_queue,
)
from tests.conftest import TEST_DIMENSIONS, make_user, open_session_key_store
from tests.storage.test_shard_ready import statements  # noqa: F401 (the recorded tool run)


@pytest.fixture(scope="session")
def citus_bin() -> Path:
    try:
        return ensure_built()
    except CitusUnavailable as ex:
        pytest.skip(f"no Citus here: {ex}")


@pytest.fixture(scope="session")
def citus(citus_bin: Path) -> Iterator[CitusCluster]:
    root = Path(tempfile.mkdtemp(prefix="ownsona-citus-"))
    root.chmod(0o755)  # the nodes run as the wheel's user (as root)
    cluster = CitusCluster(root, citus_bin)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        if not os.environ.get("OWNSONA_KEEP_CITUS"):  # keep the nodes' logs to read
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def dsn(citus: CitusCluster) -> str:
    """The coordinator, migrated: what ``DATABASE_URL`` names on Citus."""
    url = citus.dsn()
    asyncio.run(migrate(url, dimensions=TEST_DIMENSIONS))
    return url


@pytest.fixture(scope="session")
async def pool(dsn: str) -> AsyncIterator[Any]:
    """The session pool, on the coordinator. Overridden here, not inherited: the root
    ``pool`` is cached for the whole session, and in a run of the whole suite it would
    already be open on the plain database when these tests ask for it."""
    p = make_pool(dsn, min_size=1, max_size=8, name="tests-citus")
    await p.open(wait=True)
    yield p
    await p.close()


@pytest.fixture(scope="session")
async def session_key_store(dsn: str) -> AsyncIterator[Any]:
    """The key store beside the coordinator's database, for the same reason as ``pool``:
    the root one, cached for the session, would be beside the plain database, where a
    child process given the coordinator's URL (``ownsona export``) does not look."""
    keys_pool = await open_session_key_store(dsn)
    yield keys_pool
    await keys_pool.close()


@pytest.fixture
def bob(clean_db: str, alice: int, citus: CitusCluster) -> int:
    """Bob lives on the other worker than Alice (users are made until one does)."""
    home = citus.worker_of(alice)
    for n in range(64):
        user = make_user(clean_db, f"bob{n or ''}")
        if citus.worker_of(user) is not home:
            return user
    raise AssertionError("no user id hashed to the other worker")
