"""Instance labels: which machines are this agent's, and which tool call rented each.

A create carries a label derived from (agent, run, tool call), so a retried or
crashed create can look for its own machine before renting another one, and
the agent only ever destroys machines whose label marks them as its own.
"""

from __future__ import annotations

import hashlib

__all__ = ["create_label", "is_ours", "label_prefix"]

_PREFIX = "fleet-agent"


def label_prefix(agent_id: str) -> str:
    return f"{_PREFIX}/{agent_id}/"


def create_label(agent_id: str, run: int, tool_use_id: str) -> str:
    """Unique per tool call; short, since vast.ai shows labels in its console."""
    digest = hashlib.sha256(tool_use_id.encode()).hexdigest()[:10]
    return f"{label_prefix(agent_id)}r{run}-{digest}"


def is_ours(label: str | None, agent_id: str) -> bool:
    return bool(label) and str(label).startswith(label_prefix(agent_id))
