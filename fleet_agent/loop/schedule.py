"""When is the next run due? Debounce windows, wakes and the heartbeat.

Pure and deterministic: the agent workflow calls it with workflow time after
every change of its state and sleeps on a timer until the answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from fleet_agent.models import AgentConfig, Priority, Wake

__all__ = ["Due", "next_due"]


@dataclass(frozen=True)
class Due:
    at: datetime
    label: str  # the timer summary shown in the Web UI
    cause: str  # "debounce" | "wake" | "heartbeat"


def next_due(
    *,
    firsts: Mapping[Priority, datetime],
    wakes: list[Wake],
    config: AgentConfig,
    heartbeat_from: datetime,
) -> Due | None:
    """The earliest moment a run is due, or None while paused.

    `firsts` holds when the oldest pending trigger of each priority arrived
    (kept up to date by `TriggerBuffer`, so this never scans the triggers).
    A debounce window opens with the first pending trigger of its priority and
    never moves after that, so a steady stream of triggers cannot postpone the
    run forever; a P0 trigger shortens a P1 window, never the reverse.
    """
    if config.paused or config.frozen:
        return None
    candidates: list[Due] = []
    for priority, window in (
        (Priority.P0, config.p0_debounce_seconds),
        (Priority.P1, config.p1_debounce_seconds),
    ):
        first = firsts.get(priority)
        if first is not None:
            candidates.append(
                Due(
                    first + timedelta(seconds=window),
                    f"debounce {priority.value} {window:g}s",
                    "debounce",
                )
            )
    if wakes:
        wake = min(wakes, key=lambda w: (w.due_at, w.id))
        candidates.append(Due(wake.due_at, f"wake: {wake.reason[:80]}", "wake"))
    candidates.append(
        Due(heartbeat_from + timedelta(seconds=config.heartbeat_seconds), "heartbeat", "heartbeat")
    )
    return min(candidates, key=lambda d: d.at)
