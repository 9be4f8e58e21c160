"""Reading a workflow history's bytes for texts: every event serialized, so a
payload's JSON is searchable as the text it holds (`to_json` would base64 it)."""

from __future__ import annotations

import json

from temporalio.client import WorkflowHistory

__all__ = ["in_json", "raw_history"]


def raw_history(history: WorkflowHistory) -> str:
    """Every event's bytes, payloads as the JSON they hold (to_json would base64 them)."""
    return b"".join(e.SerializeToString() for e in history.events).decode("utf-8", "replace")


def in_json(text: str) -> str:
    """`text` as a JSON payload holds it (quotes and newlines escaped)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]
