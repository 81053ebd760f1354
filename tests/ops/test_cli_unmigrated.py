"""Admin commands on a data directory no server has set up: one clear line, rc 2, no cluster left.

Without the check, the CLI's pool kept failing to register the pgvector type
(the extension comes with the first migration) for its 30 s open timeout and
ended in a PoolTimeout traceback. Real processes: the embedded cluster's
lifetime follows them (storage/embedded.py).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.embedded import cluster_status, stop_embedded
from tests.ops.test_backup import REPO

from .lifecycle_helpers import base_env

#: What every such command says, after "ownsona <command>: the database in <dir> ".
NOT_SET_UP = "is not set up: run `ownsona serve` or `ownsona migrate` first"


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Outside pytest's base temp, as in test_embedded_lifetime: the cluster may run as its own user.
    with tempfile.TemporaryDirectory(prefix="ownsona-unmigrated-") as tmp:
        yield Path(tmp) / "data"
        stop_embedded(Path(tmp) / "data")  # whatever a failed test left running


def _cli(data: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**base_env(), "OWNSONA_DATA_DIR": str(data), "LOG_LEVEL": "WARNING"}
    env.pop("DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "scripts.cli", *args],
        cwd=REPO,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_admin_commands_refuse_a_database_that_was_never_migrated(data_dir: Path) -> None:
    commands = [
        (["token", "--user", "owner"], ""),
        (["user", "list"], ""),
        (["user", "disable", "owner"], ""),
        (["user", "delete", "owner", "--yes"], ""),
        (["user", "passwd", "owner"], "a long enough password\n"),
        (["user", "add", "owner"], "a long enough password\n"),
        (["keys", "rotate"], ""),
        (["export", "--all-users"], ""),
        (["relations", "rebuild"], ""),
        (["reembed", "--dry-run"], ""),
    ]
    for args, stdin in commands:
        done = _cli(data_dir, *args, stdin=stdin)
        assert done.returncode == 2, (args, done.stderr)
        expected = f"ownsona {args[0]}: the database in {data_dir} {NOT_SET_UP}"
        assert done.stderr.splitlines() == [expected], (args, done.stderr)
        assert not done.stdout
        assert not cluster_status(data_dir).running, args
    # Nothing was created on the way: the database is still bare, and a migrate sets it up.
    migrated = _cli(data_dir, "migrate")
    assert migrated.returncode == 0, migrated.stderr
    listed = _cli(data_dir, "user", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1:] == []
    assert not cluster_status(data_dir).running
