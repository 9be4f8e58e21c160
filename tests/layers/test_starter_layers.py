"""starter/'s packages stay layered: the CLI may use the console and the stack,
the stack the console, and all of them the views and the shared top-level
modules; never the other way round (docs/architecture/layout.md).

Every import counts, a lazy one inside a function too: a package that
imports another "only when it runs" still depends on it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STARTER = ROOT / "starter"


def _starter_imports(path: Path) -> set[str]:
    """The starter modules `path` imports, dotted (`starter.cli.options`)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            # `from starter import cli` names a package, not a module's name.
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name.startswith("starter.")}


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("views", {"starter.cli", "starter.console", "starter.stack"}),
        ("console", {"starter.cli", "starter.stack"}),
        ("stack", {"starter.cli"}),
    ],
)
def test_a_starter_package_never_imports_one_above_it(package: str, forbidden: set[str]) -> None:
    paths = sorted((STARTER / package).rglob("*.py"))
    assert paths, f"nothing to check in starter/{package}"
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            name
            for name in _starter_imports(path)
            if any(name == f or name.startswith(f + ".") for f in forbidden)
        )
        for path in paths
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_shared_modules_import_no_starter_package() -> None:
    packages = {"starter.cli", "starter.console", "starter.stack", "starter.views"}
    offenders = {
        path.name: sorted(
            name
            for name in _starter_imports(path)
            if any(name == p or name.startswith(p + ".") for p in packages)
        )
        for path in sorted(STARTER.glob("*.py"))
    }
    assert {k: v for k, v in offenders.items() if v} == {}
