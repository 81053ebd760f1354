"""The pure modules import only the standard library, numpy and ``memory.errors``.

An allow-list, next to the import contracts' deny-list (pyproject.toml): a pure
module that picked up any other library (an HTTP client, a schema validator, a
test tool) would pass a deny-list that does not name it, and fail here.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Each pure package, and what besides the standard library its modules may import.
PURE = {
    "memory.rules": {"numpy", "memory.errors"},
    "memory.graph": {"memory.errors"},
}


def _modules() -> list[tuple[str, Path]]:
    return [
        (package, path)
        for package in PURE
        for path in sorted((ROOT / package.replace(".", "/")).glob("*.py"))
    ]


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: inside the package itself
                continue
            found.add(node.module or "")
    return found


def _allowed(name: str, package: str) -> bool:
    top = name.split(".")[0]
    if top in sys.stdlib_module_names or name == "__future__":
        return True
    if name == package or name.startswith(package + "."):
        return True
    return any(name == ok or name.startswith(ok + ".") for ok in PURE[package])


@pytest.mark.parametrize(("package", "path"), _modules(), ids=lambda v: getattr(v, "name", v))
def test_a_pure_module_imports_only_what_it_may(package: str, path: Path) -> None:
    bad = sorted(name for name in _imports(path) if not _allowed(name, package))
    assert bad == [], f"{path.relative_to(ROOT)} imports {bad}; {package} is pure (see PURE)"


def test_every_pure_package_is_examined() -> None:
    assert {package for package, _ in _modules()} == set(PURE)
