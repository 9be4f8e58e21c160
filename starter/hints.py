"""How printed hints name our commands, so that they work as shown.

`make run` installs into the checkout's virtualenv and activates nothing: the
console script and the Temporal CLI live in `.venv/bin`, not on PATH. Hints
are written for a shell in the checkout, where `make run` was typed.
"""

from __future__ import annotations

__all__ = ["CLI", "TEMPORAL"]

CLI = ".venv/bin/fleet-agent"
TEMPORAL = ".venv/bin/temporal"
