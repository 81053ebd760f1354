"""bootstrap/: building connects to nothing; opening fails in plain words; no api in workers.

The web process is built up front (``bootstrap.web.WebProcess``) and opened
by the lifespan; a worker or an admin command must start without the web
package.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bootstrap.web import WebProcess
from config.settings import Settings
from storage.errors import StorageError
from tests.conftest import QUEUE_NAMESPACE
from tests.e2e.server import free_port

REPO = Path(__file__).resolve().parents[2]


async def test_building_the_web_process_connects_to_nothing_and_opening_names_the_database(
    tmp_path: Path,
) -> None:
    dead = f"postgresql://ownsona:secret@127.0.0.1:{free_port()}/x?connect_timeout=1"
    settings = Settings(
        public_url="http://127.0.0.1:8000",
        database_url=dead,
        redis_url=f"redis://127.0.0.1:{free_port()}/0",
        data_dir=tmp_path / "data",
        queue_namespace=QUEUE_NAMESPACE,
    )
    web = WebProcess(settings)  # nothing listens at either address: building must not care
    assert web.runtime.deps.pool.closed
    with pytest.raises(StorageError, match="^DATABASE_URL: cannot connect"):
        await web.open()
    await web.close()  # already closed by the failed open: a second close is harmless
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    "module",
    [
        "scripts.cli",
        "bootstrap.worker",
        "bootstrap.admin",
        "scripts.reembed",
        "scripts.backup_commands",
        "scripts.relations_commands",
        "scripts.account_commands",
    ],
)
def test_workers_and_commands_do_not_import_the_web_package(module: str) -> None:
    probe = (
        f"import sys, {module}\n"
        "web = sorted(m for m in sys.modules if m == 'api' or m.startswith('api.'))\n"
        "assert not web, web\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
