"""What a benchmark run starts with: its work directory and the facts its report opens with."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

from storage.embedded import stop_embedded


def work_directory(workdir: str | Path, *, fresh: bool) -> Path:
    """``workdir`` resolved and made; with ``fresh``, its embedded database removed first."""
    path = Path(workdir).resolve()
    if fresh and (path / "data").exists():
        stop_embedded(path / "data")  # a cluster left running would hold the files
        shutil.rmtree(path / "data")
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_facts() -> dict[str, Any]:
    """When the run started (UTC, to the minute) and on how many CPUs."""
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": os.cpu_count()}
