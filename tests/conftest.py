"""Shared fixtures: a real embedded PostgreSQL + pgvector, migrated once per session.

Set ``OWNSONA_TEST_DATABASE_URL`` to run against another PostgreSQL with
pgvector instead (the database is wiped).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from storage.embedded import start_embedded
from storage.migrate import migrate
from storage.pool import make_pool

TEST_DIMENSIONS = 384


@pytest.fixture(scope="session")
def pg_data_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="ownsona-test-") as tmp:
        yield Path(tmp)
        from storage.embedded import stop_embedded

        stop_embedded(Path(tmp))


@pytest.fixture(scope="session")
def dsn(pg_data_dir: Path) -> str:
    """A freshly created, migrated database for this test session."""
    explicit = os.environ.get("OWNSONA_TEST_DATABASE_URL")
    if explicit:
        url = explicit
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    else:
        url = start_embedded(pg_data_dir, database="ownsona_test")
    asyncio.run(migrate(url, dimensions=TEST_DIMENSIONS))
    return url


@pytest.fixture(scope="session")
async def pool(dsn: str) -> AsyncIterator:
    p = make_pool(dsn, min_size=1, max_size=8, name="tests")
    await p.open(wait=True)
    yield p
    await p.close()


def truncate_all(dsn: str) -> None:
    """Empty every table but the schema bookkeeping (new migrations are covered too)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                " AND tablename NOT IN ('schema_version', 'store_meta')"
            )
        ]
        conn.execute(
            sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(
                sql.SQL(", ").join(sql.Identifier(t) for t in tables)
            )
        )


@pytest.fixture
def clean_db(dsn: str) -> str:
    """Every table emptied before the test; returns the DSN."""
    truncate_all(dsn)
    return dsn


@pytest.fixture(scope="session")
def embedder():
    """The real local model (all-MiniLM-L6-v2 int8 ONNX), loaded once."""
    from memory.providers.embedders import LocalEmbedder

    return LocalEmbedder.bundled()


@pytest.fixture
def settings():
    from config.settings import Settings

    return Settings(public_url="http://127.0.0.1:8000")


def make_user(dsn: str, username: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO users (username, password_hash) VALUES (%s, 'x') RETURNING id", (username,)
        ).fetchone()
    assert row is not None
    return int(row[0])


#: Run the suites with memories sealed at rest (docs/at-rest.md), as a new deployment does;
#: OWNSONA_TEST_SEALED=0 runs them plain.
SEALED_RUN = os.environ.get("OWNSONA_TEST_SEALED", "1").lower() not in ("0", "false", "no", "off")


def _session_master_key() -> str:
    """The session's master key, set where every ``ownsona`` process the tests start finds it.

    Children inherit this environment, so a command or server reads the rows the
    tests sealed with the same key, from the same key store (the default one beside
    the database it is given), and is not refused for lacking the key of a store
    that was sealed. A plain run turns sealing off for them (they write plain rows,
    as ``plain_deps`` does). Tests of "no master key" or of the embedded default's
    generated key set their own environment.
    """
    from storage.sealing.master_key import new_key_text

    # Kept in the environment: a second import of this module finds the same key.
    key = os.environ.setdefault("OWNSONA_TEST_MASTER_KEY", new_key_text())
    # One key store per database, beside it: the one the session's keyring uses.
    for name in ("OWNSONA_KEYSTORE_URL", "OWNSONA_MASTER_KEY_FILE", "OWNSONA_MASTER_KEY_PREVIOUS"):
        os.environ.pop(name, None)
    os.environ["OWNSONA_MASTER_KEY"] = key
    os.environ["OWNSONA_SEAL_MEMORIES"] = "1" if SEALED_RUN else "0"
    return key


#: The master key of ``test_keyring`` and every child's OWNSONA_MASTER_KEY.
SESSION_MASTER_KEY = _session_master_key()


def sealing_settings() -> dict[str, Any]:
    """The same, as Settings fields: for a process a test builds in-process from Settings."""
    return {"master_key": SESSION_MASTER_KEY, "seal_memories": SEALED_RUN}


def sealing_env() -> dict[str, str]:
    """The session's sealing settings, for a process started with an environment of its own
    (one that drops every ``OWNSONA_`` variable it inherits)."""
    return {
        "OWNSONA_MASTER_KEY": SESSION_MASTER_KEY,
        "OWNSONA_SEAL_MEMORIES": os.environ["OWNSONA_SEAL_MEMORIES"],
    }


async def open_session_key_store(dsn: str) -> Any:
    """A pool on a fresh key store beside ``dsn``'s database, the session's key recorded:
    the store a child process given ``DATABASE_URL=dsn`` and the session's key opens."""
    from memory.keyring import Keyring
    from storage import key_store
    from storage.sealing.master_key import parse_master_key

    url = key_store.beside(dsn)
    await key_store.ensure_key_store(url, create_from=dsn)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE master_keys, data_keys")
    keys_pool = key_store.make_key_store_pool(url)
    await keys_pool.open()
    await Keyring(parse_master_key(SESSION_MASTER_KEY, source="tests"), keys_pool).check()
    return keys_pool


@pytest.fixture(scope="session")
async def session_key_store(dsn: str) -> AsyncIterator:
    """The key store beside the test database (:func:`open_session_key_store`)."""
    keys_pool = await open_session_key_store(dsn)
    yield keys_pool
    await keys_pool.close()


@pytest.fixture
def test_keyring(session_key_store: Any) -> Any:
    """A keyring under the session's master key, as a process's: its cache of opened keys is
    this test's alone, so a key another process destroyed in an earlier test is not reused."""
    from memory.keyring import Keyring
    from storage.sealing.master_key import parse_master_key

    return Keyring(parse_master_key(SESSION_MASTER_KEY, source="tests"), session_key_store)


@pytest.fixture
async def sealed_deps(clean_db, pool, embedder, settings, test_keyring):
    """Deps whose writes seal (OWNSONA_SEAL_MEMORIES with a master key)."""
    import dataclasses

    from bootstrap.providers import make_extractor
    from memory.deps import Deps

    sealing = dataclasses.replace(settings, seal_memories=True)
    return Deps(
        settings=sealing,
        pool=pool,
        embedder=embedder,
        extractor=make_extractor(sealing),
        keyring=test_keyring,
    )


@pytest.fixture
def plain_deps(clean_db, pool, embedder, settings):
    """Deps that write plain rows, whatever OWNSONA_TEST_SEALED says (a sealing test's control)."""
    import dataclasses

    from bootstrap.providers import make_extractor
    from memory.deps import Deps

    plain = dataclasses.replace(settings, seal_memories=False)
    return Deps(settings=plain, pool=pool, embedder=embedder, extractor=make_extractor(plain))


async def worker_keyring(dsn: str) -> Any:
    """A worker's own keyring, opened on its event loop as ``ownsona worker`` opens it, under
    the session's master key; None in a plain run. Its Deps' close closes it."""
    if not SEALED_RUN:
        return None
    from bootstrap.sealing import build_keyring, open_keyring
    from config.settings import Settings

    sealing = build_keyring(Settings(database_url=dsn, master_key=SESSION_MASTER_KEY), dsn)
    await open_keyring(sealing, dsn)
    return sealing.keyring


@pytest.fixture
def run_keyring(request: pytest.FixtureRequest) -> Any:
    """The tests' keyring in a sealed run, None in a plain one: for runtimes built by hand."""
    return request.getfixturevalue("test_keyring") if SEALED_RUN else None


@pytest.fixture
def deps(request, plain_deps):
    if SEALED_RUN:
        return request.getfixturevalue("sealed_deps")
    return plain_deps


@pytest.fixture
def alice(clean_db) -> int:
    return make_user(clean_db, "alice")


@pytest.fixture
def bob(clean_db) -> int:
    return make_user(clean_db, "bob")


# --- Redis: the real server at REDIS_URL, or (locally only) fakeredis over TCP ---

_REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")
# Every test session gets its own queue namespace, inherited by the servers and
# workers it starts: two sessions sharing one Redis never take each other's messages.
os.environ.setdefault("QUEUE_NAMESPACE", f"ownsona-test-{os.getpid()}")
QUEUE_NAMESPACE = os.environ["QUEUE_NAMESPACE"]
_redis_mode: list[str] = []


def namespace_patterns(namespace: str) -> tuple[str, ...]:
    """SCAN patterns for every Redis key of ``namespace`` and only of it.

    Keys are ``<namespace>:...`` (the queues, positions) or ``<namespace>-<kind>:...``
    (results; a test's own ``<namespace>-stall``, ``-dead``, ...). Never ``<namespace>*``:
    the session of pid 1624 would then delete the keys of the session of pid 16244
    sharing the server, mid-test (a message vanished under a waiting caller).
    """
    return (namespace, f"{namespace}:*", f"{namespace}-*")


def delete_namespace(client: Any, namespace: str) -> None:
    """Delete every key of ``namespace`` (:func:`namespace_patterns`) through ``client``."""
    keys = {
        key
        for pattern in namespace_patterns(namespace)
        for key in client.scan_iter(match=pattern, count=1000)
    }
    if keys:
        client.delete(*keys)


def _real_redis_reachable(url: str) -> bool:
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
        return True
    except redis.RedisError:
        return False


def pytest_report_header(config):  # type: ignore[no-untyped-def]
    if _real_redis_reachable(_REDIS_URL):
        return f"redis: real server at {_REDIS_URL}"
    if os.environ.get("CI"):
        return f"redis: UNREACHABLE at {_REDIS_URL} (CI requires it: Redis tests will fail)"
    return f"redis: none at {_REDIS_URL}; Redis tests use fakeredis over TCP instead"


@pytest.fixture(scope="session")
def redis_server_url() -> Iterator[str]:
    if _real_redis_reachable(_REDIS_URL):
        yield _REDIS_URL
        return
    if os.environ.get("CI"):
        pytest.fail(f"Redis is required in CI but {_REDIS_URL} is unreachable")
    import threading

    from fakeredis import TcpFakeServer

    server = TcpFakeServer(("127.0.0.1", 0), server_type="redis")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    yield f"redis://{host}:{port}/0"
    server.shutdown()
    server.server_close()


@pytest.fixture
def redis_url(redis_server_url: str) -> Iterator[str]:
    """Redis with none of this session's keys left from an earlier test.

    Only keys under this session's namespace are deleted: other sessions
    sharing the server keep theirs.
    """
    import redis

    client = redis.Redis.from_url(redis_server_url)

    def clear() -> None:
        delete_namespace(client, QUEUE_NAMESPACE)

    clear()
    yield redis_server_url
    clear()
    client.close()
