"""``scripts/serve``, ``scripts/test`` and ``scripts/check`` install only when they must.

That is on the first run, when pyproject.toml changed, or (for the test and
check tools) when only OwnSona itself was installed so far.

The checkout is copied into a temporary directory whose ``.venv`` holds two
small stand-ins: a ``python`` that records every ``-m pip`` call (and runs the
real interpreter for anything else) and an ``ownsona`` that says what it was
asked to serve. So the script's own decisions are tested, with no package
index and in milliseconds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    for script in ("serve", "test", "_install.sh"):
        shutil.copy(ROOT / "scripts" / script, root / "scripts" / script)
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text(
        "#!/usr/bin/env bash\n"
        'if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then echo "pip $*" >> "$(dirname "$0")/../pip.log"; exit 0; fi\n'
        f'exec {sys.executable} "$@"\n'
    )
    ownsona = bin_dir / "ownsona"
    ownsona.write_text('#!/usr/bin/env bash\necho "ownsona $*"\n')
    for shim in (python, ownsona):
        shim.chmod(0o755)
    return root


def _serve(root: Path, *args: str) -> tuple[str, list[str]]:
    return _run(root, "serve", *args)


def _run(root: Path, script: str, *args: str) -> tuple[str, list[str]]:
    done = subprocess.run(
        ["bash", str(root / "scripts" / script), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PIP_NO_INDEX": "1"},
    )
    assert done.returncode == 0, done.stderr
    log = root / ".venv" / "pip.log"
    calls = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return done.stdout, calls


def test_the_first_run_installs_and_later_runs_do_not(tmp_path):
    root = _checkout(tmp_path)
    out, calls = _serve(root, "--port", "18100")
    assert "ownsona serve --port 18100" in out
    assert any("install" in c and "-e ." in c for c in calls), calls
    out, calls = _serve(root, "--port", "18100")
    assert calls == [], "a second start of an installed checkout must not call pip"
    assert "ownsona serve --port 18100" in out


def test_a_changed_pyproject_installs_again(tmp_path):
    root = _checkout(tmp_path)
    _serve(root)
    with open(root / "pyproject.toml", "a") as f:
        f.write("\n# a new dependency would be here\n")
    _, calls = _serve(root)
    assert any("-e ." in c for c in calls), calls
    _, calls = _serve(root)
    assert calls == []


def test_the_test_tools_are_installed_once_and_serve_then_needs_nothing(tmp_path):
    root = _checkout(tmp_path)
    out, calls = _run(root, "test", "--version")
    assert "pytest" in out
    assert any("-e .[test]" in c for c in calls), calls
    _, calls = _run(root, "test", "--version")
    assert calls == [], "a second test run of an installed checkout must not call pip"
    # The test tools include everything serve needs.
    _, calls = _serve(root)
    assert calls == []


def test_after_serve_the_first_test_run_adds_the_test_tools(tmp_path):
    root = _checkout(tmp_path)
    _serve(root)
    _, calls = _run(root, "test", "--version")
    assert any("-e .[test]" in c for c in calls), calls
    _, calls = _run(root, "test", "--version")
    assert calls == []
