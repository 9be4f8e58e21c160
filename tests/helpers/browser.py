"""Debian's chromium for the console's browser tests (Playwright drives it):
where it is, the flags it runs headless with, and `need_chromium`, which
skips a test without it, saying why, or fails it when `CI` is set."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def need_chromium(chromium: Path = CHROMIUM) -> None:
    """Skip without chromium, saying why; fail instead when `CI` is set, so
    the browser test never goes quietly missing from a CI run."""
    if chromium.exists():
        return
    why = f"no chromium at {chromium}: `apt-get install chromium` (make test does)"
    if os.environ.get("CI"):
        pytest.fail(f"{why}; CI is set, so the console's browser test must run")
    pytest.skip(why)
