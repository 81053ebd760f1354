"""The embedded cluster: its page cache is sized for a memory store, and sizing keeps data."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
import pytest

from storage.embedded import (
    MAX_SHARED_BUFFERS,
    MIN_SHARED_BUFFERS,
    shared_buffers_bytes,
    start_embedded,
    stop_embedded,
)

MB = 2**20
GB = 2**30
ROOT = Path(__file__).resolve().parents[2]


def _shared_buffers(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT pg_size_bytes(current_setting('shared_buffers'))").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize(
    ("memory", "expected"),
    [
        (24 * GB, 1024 * MB),  # this machine: capped
        (4 * GB, 512 * MB),
        (2 * GB, 256 * MB),
        (512 * MB, 128 * MB),  # never below PostgreSQL's own default
        (0, 128 * MB),  # memory unknown
        (3 * GB + 12345, 384 * MB),  # whole megabytes
    ],
)
def test_cache_is_an_eighth_of_memory_within_bounds(memory: int, expected: int) -> None:
    assert shared_buffers_bytes(memory) == expected
    assert MIN_SHARED_BUFFERS <= expected <= MAX_SHARED_BUFFERS


def test_a_new_cluster_starts_sized_and_an_old_one_is_resized_keeping_its_rows(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    dsn = start_embedded(data, database="keep")
    try:
        assert _shared_buffers(dsn) == shared_buffers_bytes() > 128 * MB
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE facts (text text)")
            conn.execute("INSERT INTO facts VALUES ('my sister lives in Lisbon')")
            # What a data directory made before the sizing runs with.
            conn.execute("ALTER SYSTEM SET shared_buffers = '128MB'")
        stop_embedded(data)
        # A new process, as a restart of OwnSona is (the wheel caches one handle per process).
        script = textwrap.dedent(
            f"""
            from pathlib import Path
            from storage.embedded import start_embedded
            print(start_embedded(Path({str(data)!r}), database="keep"))
            """
        )
        out = subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        again = out.stdout.strip().splitlines()[-1]
        assert _shared_buffers(again) == shared_buffers_bytes() > 128 * MB
        with psycopg.connect(again) as conn:
            assert conn.execute("SELECT text FROM facts").fetchall() == [
                ("my sister lives in Lisbon",)
            ]
    finally:
        stop_embedded(data)
