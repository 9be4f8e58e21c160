"""Is there compiled bytecode for a package's modules?

Temporal's workflow sandbox imports the workflow modules afresh for every
workflow it starts (each agent run is one), through Python's ordinary
loaders. Where a module has no valid bytecode in its `__pycache__`, that
import compiles the source again, every time: measured at about 7 % of a
worker's CPU at 100 agents (docs/decisions/load-time.md, "Bytecode for the sandbox").
Python writes the bytecode on the first import unless told not to
(PYTHONDONTWRITEBYTECODE, common in container images) or unable to (a
read-only install); the worker checks at start and says so.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["bytecode_warning", "without_bytecode"]

# A .pyc's header: magic (4 bytes), flags (4), then, for a timestamp-based
# file (flags 0), the source's mtime (4) and size (4), little-endian.
_HEADER = 16


def _fresh(source: Path) -> bool:
    cached = Path(importlib.util.cache_from_source(str(source)))
    try:
        header = cached.read_bytes()[:_HEADER]
        stat = source.stat()
    except OSError:
        return False
    if len(header) < _HEADER or header[:4] != importlib.util.MAGIC_NUMBER:
        return False
    flags = int.from_bytes(header[4:8], "little")
    if flags & 0b1:  # hash-based: checked against the source's hash, or not at all
        return True
    mtime = int.from_bytes(header[8:12], "little")
    size = int.from_bytes(header[12:16], "little")
    return mtime == int(stat.st_mtime) & 0xFFFFFFFF and size == stat.st_size & 0xFFFFFFFF


def without_bytecode(package_dir: Path) -> list[Path]:
    """The package's modules (its own folder, not below) whose bytecode is
    missing or older than their source, so that every import compiles them."""
    return sorted(p for p in package_dir.glob("*.py") if not _fresh(p))


def bytecode_warning(package_dir: Path, *, writing_off: bool) -> str | None:
    """What the worker logs at start when the sandbox would compile modules
    of `package_dir` for every workflow; None when all have bytecode."""
    missing = without_bytecode(package_dir)
    if not missing:
        return None
    why = (
        "PYTHONDONTWRITEBYTECODE is set"
        if writing_off
        else f"Python could not write {package_dir / '__pycache__'}"
    )
    names = ", ".join(p.name for p in missing[:5]) + (", ..." if len(missing) > 5 else "")
    return (
        f"{len(missing)} workflow module(s) have no compiled bytecode ({names}; {why}): "
        "the workflow sandbox compiles them from source for every workflow it starts, "
        "about 7 % more worker CPU at 100 agents. Compile them where the code is installed: "
        f"python -m compileall {package_dir}"
    )
