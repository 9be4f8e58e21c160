"""Adding one known demand event to a config's list (`AgentConfig.demand_events`).

The same rule wherever an event comes from (the model's `expect_demand`,
the `fleet-agent expect` command): events that have ended are dropped, an
event already on the list (same window, same multiplier) is not repeated,
and the list holds at most `MAX_EVENTS`: past that, the other event that
ends first is dropped and named, so nobody loses one unknowingly. The new
event itself is always kept: it is what the caller asked for.

Pure and deterministic: `now` is given (a workflow's clock, or the CLI's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from .forecast import DemandEvent

__all__ = ["MAX_EVENTS", "EventMerge", "merge_event"]

#: How many known events a config holds (`AgentConfig.demand_events`).
MAX_EVENTS = 20


@dataclass(frozen=True)
class EventMerge:
    """The list after adding one event, and what happened on the way."""

    events: list[DemandEvent]
    #: False: the event was on the list already (nothing added).
    added: bool
    #: Events dropped to keep at most MAX_EVENTS (the ones that end first).
    dropped: list[DemandEvent] = field(default_factory=list)
    #: Events dropped because they had ended.
    ended: list[DemandEvent] = field(default_factory=list)

    def notes(self) -> list[str]:
        """What a caller should say besides "recorded": one line each."""
        lines = []
        if not self.added:
            lines.append("already known: nothing added")
        if self.dropped:
            lines.append(
                f"dropped to keep at most {MAX_EVENTS} events (ending first): "
                + "; ".join(e.describe() for e in self.dropped)
            )
        return lines


def _same(a: DemandEvent, b: DemandEvent) -> bool:
    """One event for the forecast: the note does not change what it does."""
    return (a.start, a.end, a.multiplier) == (b.start, b.end, b.multiplier)


def merge_event(events: Sequence[DemandEvent], new: DemandEvent, now: datetime) -> EventMerge:
    """`events` with `new` added (see the module doc); their order is kept,
    the new event last."""
    ended = [e for e in events if e.end <= now]
    kept = [e for e in events if e.end > now]
    if any(_same(e, new) for e in kept):
        return EventMerge(events=kept, added=False, ended=ended)
    dropped: list[DemandEvent] = []
    while len(kept) >= MAX_EVENTS:
        first = min(kept, key=lambda e: (e.end, e.start))
        kept.remove(first)
        dropped.append(first)
    return EventMerge(events=[*kept, new], added=True, dropped=dropped, ended=ended)
