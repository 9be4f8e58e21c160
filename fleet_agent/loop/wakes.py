"""Rules for scheduled wakes, shared by the run (which answers the model) and
the agent workflow (which owns the wakes and applies the same rules again).

Pure functions over pydantic models: deterministic, so safe inside workflows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from fleet_agent.models import Wake

__all__ = [
    "HEARTBEAT_SLACK_SECONDS",
    "MAX_DELAY_SECONDS",
    "MAX_PENDING_WAKES",
    "MERGE_WINDOW_SECONDS",
    "MIN_DELAY_SECONDS",
    "WakeDecision",
    "add_wake",
    "cancel_wake",
    "decide_wake",
    "due_wakes",
]

MIN_DELAY_SECONDS = 30
MAX_DELAY_SECONDS = 24 * 3600
# A request this close to the heartbeat interval adds nothing: the heartbeat
# already runs the agent then (the old system re-ran "check in 5 min" wakes).
HEARTBEAT_SLACK_SECONDS = 60
MERGE_WINDOW_SECONDS = 30
MAX_PENDING_WAKES = 50
_MAX_REASON = 500

Outcome = Literal["scheduled", "merged", "heartbeat_covers", "refused"]


@dataclass(frozen=True)
class WakeDecision:
    outcome: Outcome
    message: str
    wake: Wake | None = None


def decide_wake(
    wakes: list[Wake],
    *,
    now: datetime,
    delay_seconds: float,
    reason: str,
    run: int,
    wake_id: str,
    heartbeat_seconds: int,
) -> WakeDecision:
    """What `schedule_next_check(delay_seconds, reason)` does to `wakes`."""
    if math.isnan(delay_seconds):
        return WakeDecision("refused", "Refused: delay_seconds must be a number of seconds.")
    delay = min(max(float(delay_seconds), MIN_DELAY_SECONDS), MAX_DELAY_SECONDS)
    clamped = "" if delay == delay_seconds else f" (delay clamped from {delay_seconds:g}s)"
    if abs(delay - heartbeat_seconds) <= HEARTBEAT_SLACK_SECONDS:
        return WakeDecision(
            "heartbeat_covers",
            f"No wake scheduled: the heartbeat already covers this (every "
            f"{heartbeat_seconds}s).{clamped}",
        )
    due_at = now + timedelta(seconds=delay)
    reason = reason.strip()[:_MAX_REASON] or "check"
    for existing in wakes:
        if abs((existing.due_at - due_at).total_seconds()) <= MERGE_WINDOW_SECONDS:
            return WakeDecision(
                "merged",
                f"Merged into wake {existing.id} due {existing.due_at.isoformat()}.{clamped}",
                existing,
            )
    if len(wakes) >= MAX_PENDING_WAKES:
        return WakeDecision(
            "refused",
            f"Refused: {MAX_PENDING_WAKES} wakes are already pending; cancel one first.",
        )
    wake = Wake(id=wake_id, due_at=due_at, reason=reason, requested_by_run=run)
    return WakeDecision(
        "scheduled", f"Scheduled wake {wake_id} at {due_at.isoformat()}.{clamped}", wake
    )


def add_wake(wakes: list[Wake], wake: Wake) -> list[Wake]:
    """Apply a wake a run scheduled; idempotent, and re-checks merge and cap."""
    if any(w.id == wake.id for w in wakes):
        return wakes
    for existing in wakes:
        if abs((existing.due_at - wake.due_at).total_seconds()) <= MERGE_WINDOW_SECONDS:
            return wakes
    if len(wakes) >= MAX_PENDING_WAKES:
        return wakes
    return sorted([*wakes, wake], key=lambda w: (w.due_at, w.id))


def cancel_wake(wakes: list[Wake], wake_id: str) -> tuple[list[Wake], bool]:
    """Remove one wake; returns the new list and whether it existed."""
    kept = [w for w in wakes if w.id != wake_id]
    return kept, len(kept) != len(wakes)


def due_wakes(wakes: list[Wake], now: datetime) -> tuple[list[Wake], list[Wake]]:
    """Split into (due, still pending)."""
    return [w for w in wakes if w.due_at <= now], [w for w in wakes if w.due_at > now]
