"""The agent loop's inputs at fixed times: triggers, wakes, verdict tags and
prompt-history entries, for the tests of the Temporal-free rules (schedule,
wakes, prompt, transcript)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from fleet_agent.models import Trigger, TriggerKind, Wake

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


_seq = iter(range(1, 1_000_000))


def trig(kind: TriggerKind, after: float = 0.0, **fields: Any) -> Trigger:
    return Trigger(seq=next(_seq), kind=kind, received_at=at(after), **fields)


def wake(wake_id: str, after: float, reason: str = "check") -> Wake:
    return Wake(id=wake_id, due_at=at(after), reason=reason, requested_by_run=1)


TAG = '<verdict>{{"action": {a}, "state_changed": {s}}}</verdict>'


@dataclass(frozen=True)
class Entry:
    """A run as the prompt history reads it (`fleet_agent.llm.history`)."""

    run: int
    started_at: datetime
    status: str
    trigger_block: str
    final_text: str
    actions_digest: str = ""
