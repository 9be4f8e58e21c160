"""The benchmarks are one package, run as modules from the repository root
(`python -m bench.<folder>.<script>`, bench/README.md): every module imports
as part of it with no import path set by hand, and every script starts.

What the scripts measure is theirs to say; this only keeps them runnable,
since no test runs most of them (they take minutes)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
FOLDERS = {"market_day", "perf", "llm_cost", "demand_day", "market_week", "structure"}


def _scripts() -> list[str]:
    """`bench.<folder>.<script>` of each module that is a script (no leading `_`)."""
    return sorted(
        f"bench.{path.parent.name}.{path.stem}"
        for folder in FOLDERS
        for path in (BENCH / folder).glob("*.py")
        if not path.name.startswith("_")
    )


def test_no_bench_module_sets_the_import_path() -> None:
    offenders = []
    for path in BENCH.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "path"
                and isinstance(node.value, ast.Name)
                and node.value.id == "sys"
            ):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_every_script_says_how_to_run_it_and_runs_as_a_module() -> None:
    """Its docstring's command is the module's, and it has a `__main__` guard."""
    scripts = _scripts()
    assert len(scripts) >= 14, scripts
    for name in scripts:
        path = ROOT / (name.replace(".", "/") + ".py")
        source = path.read_text()
        assert f"python -m {name}" in (ast.get_docstring(ast.parse(source)) or ""), name
        assert 'if __name__ == "__main__":' in source, name


# One interpreter for all: import every module of the package, then run each
# script with --help as `python -m` would (argparse exits 0 after the usage).
_PROBE = """
import contextlib, importlib, io, json, pkgutil, runpy, sys, warnings
import bench
warnings.simplefilter("ignore", RuntimeWarning)  # a script another one imported
modules = [m.name for m in pkgutil.walk_packages(bench.__path__, "bench.")]
for name in modules:
    importlib.import_module(name)
usage = {}
for name in json.loads(sys.argv[1]):
    sys.argv = [name, "--help"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            runpy.run_module(name, run_name="__main__", alter_sys=True)
            code = None
        except SystemExit as done:
            code = done.code
    usage[name] = [code, out.getvalue().splitlines()[0] if out.getvalue() else ""]
print(json.dumps({"modules": modules, "usage": usage}))
"""


def test_every_module_imports_and_every_script_starts() -> None:
    scripts = _scripts()
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(scripts)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert {m.split(".")[1] for m in found["modules"]} >= FOLDERS | {"_common"}
    assert set(scripts) <= set(found["modules"])
    for name, (code, first_line) in found["usage"].items():
        assert code == 0 and first_line.startswith(f"usage: python -m {name}"), (name, code)
