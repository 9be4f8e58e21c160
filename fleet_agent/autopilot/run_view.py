"""What an autopilot run has seen, read back from its messages: the context
(target, limits, fleet rows, pending wakes) and the tool calls and results
so far, as the model would read them (prompt.py writes that context). Split
from autopilot.py, which decides."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

__all__ = [
    "CREATES",
    "INSTANCES",
    "MESSAGE",
    "RESULT_JSON",
    "Run",
    "text_of",
    "tool_use",
    "verdict",
]

# The first line of each operator message in the trigger block (see prompt.py).
MESSAGE = re.compile(r"^Message from (?P<author>.+?) at \S+ \S+Z:\n(?P<text>.*)$", re.M)
_TARGET = re.compile(r"^## Target\n(?P<target>[\d.]+) proofs/hour", re.M)
# The Limits line of `spare_one_machine` (prompt.py).
_SPARE = re.compile(r"^- spare for one failure: on\b", re.M)
# The Limits line of max_creates_per_hour (prompt.py).
CREATES = re.compile(r"^- at most (?P<n>\d+) machines rented and", re.M)
INSTANCES = re.compile(r"^- at most (?P<n>\d+) instances, ", re.M)
_FLEET_JSON = re.compile(r"## Fleet\n[^\n]*\n```json\n(?P<rows>.*?)\n```", re.S)
RESULT_JSON = re.compile(r"(\[.*\])", re.S)
# The context's pending wakes (prompt.py, `context_message`): "- <id> due <time>: <reason>".
_PENDING_WAKES = re.compile(r"^## Pending wakes\n(?P<lines>(?:- .*\n?)*)", re.M)
_WAKE_REASON = re.compile(r"^- \S+ due \S+(?: \S+)?: (?P<reason>.*)$", re.M)


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(
        str(b.get("text") or b.get("content") or "") for b in content if isinstance(b, dict)
    )


def verdict(action: bool, state_changed: bool) -> str:
    body = json.dumps({"action": action, "state_changed": state_changed})
    return f"<verdict>{body}</verdict>"


def tool_use(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:20]}", "name": name, "input": args}


class Run:
    """What the current run has seen so far, read back from the messages."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        # The context message may come as text blocks (a cache breakpoint on it).
        start = max(
            (
                i
                for i, m in enumerate(messages)
                if m["role"] == "user" and text_of(m["content"]).startswith("[run #")
            ),
            default=len(messages) - 1,
        )
        self.context = text_of(messages[start]["content"]) if messages else ""
        self.calls: dict[str, str] = {}  # tool_use id -> name
        self.inputs: list[tuple[str, dict[str, Any]]] = []  # (tool name, input), in order
        self.results: list[tuple[str, str, bool]] = []  # (tool name, content, is_error)
        for m in messages[start + 1 :]:
            if not isinstance(m["content"], list):
                continue
            for block in m["content"]:
                if block.get("type") == "tool_use":
                    self.calls[block["id"]] = block["name"]
                    self.inputs.append((block["name"], dict(block.get("input") or {})))
                elif block.get("type") == "tool_result":
                    name = self.calls.get(block["tool_use_id"], "?")
                    self.results.append(
                        (name, text_of(block.get("content", "")), bool(block.get("is_error")))
                    )

    def pending_wakes(self) -> list[str]:
        """The reasons of the wakes pending when the run started."""
        found = _PENDING_WAKES.search(self.context)
        if found is None:
            return []
        return [m.group("reason").strip() for m in _WAKE_REASON.finditer(found.group("lines"))]

    def target(self) -> float:
        found = _TARGET.search(self.context)
        return float(found.group("target")) if found else 0.0

    def spare(self) -> bool:
        return _SPARE.search(self.context) is not None

    def limit(self, line: re.Pattern[str]) -> int:
        """A count of the Limits section (0 when it is not there)."""
        found = line.search(self.context)
        return int(found.group("n")) if found else 0

    def fleet_rows(self) -> list[dict[str, Any]] | None:
        found = _FLEET_JSON.search(self.context)
        if found is None:
            return None
        rows: list[dict[str, Any]] = json.loads(found.group("rows"))
        return rows
