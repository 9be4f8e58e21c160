"""Which workflow modules the sandbox would compile from source at every
workflow start (runtime/bytecode.py), and the worker's warning."""

from __future__ import annotations

import os
import py_compile
from pathlib import Path

from runtime.bytecode import bytecode_warning, without_bytecode


def _package(tmp_path: Path) -> Path:
    pkg = tmp_path / "wf"
    pkg.mkdir()
    for name in ("__init__.py", "agent.py", "run.py"):
        (pkg / name).write_text(f"X = {name!r}\n")
    return pkg


def test_modules_without_fresh_bytecode_are_named(tmp_path: Path) -> None:
    pkg = _package(tmp_path)
    assert [p.name for p in without_bytecode(pkg)] == ["__init__.py", "agent.py", "run.py"]
    for p in pkg.glob("*.py"):
        py_compile.compile(str(p), doraise=True)
    assert without_bytecode(pkg) == []
    # An edit after the compile: the bytecode no longer matches its source.
    run = pkg / "run.py"
    run.write_text("X = 'edited, and longer'\n")
    stat = run.stat()
    os.utime(run, (stat.st_atime, stat.st_mtime + 5))
    assert without_bytecode(pkg) == [run]
    # Bytecode of another Python, or cut short, is not bytecode this one uses.
    written = py_compile.compile(str(run), doraise=True)
    assert written is not None
    cached = Path(written)
    cached.write_bytes(b"\x00\x00\x00\x00" + cached.read_bytes()[4:])
    assert without_bytecode(pkg) == [run]
    cached.write_bytes(b"")
    assert without_bytecode(pkg) == [run]


def test_the_warning_says_why_and_what_to_run(tmp_path: Path) -> None:
    pkg = _package(tmp_path)
    off = bytecode_warning(pkg, writing_off=True)
    assert off is not None
    assert off.startswith("3 workflow module(s) have no compiled bytecode (__init__.py, agent.py")
    assert "PYTHONDONTWRITEBYTECODE is set" in off
    assert off.endswith(f"python -m compileall {pkg}")
    blocked = bytecode_warning(pkg, writing_off=False)
    assert blocked is not None and f"could not write {pkg / '__pycache__'}" in blocked
    for p in pkg.glob("*.py"):
        py_compile.compile(str(p), doraise=True)
    assert bytecode_warning(pkg, writing_off=True) is None
