"""Adding one known demand event to a config's list (`AgentConfig.demand_events`).

The same rule wherever an event comes from (the model's `expect_demand`,
the `fleet-agent expect` command): events that have ended are dropped, an
event already on the list (same window, same multiplier, whoever set it) is
not repeated, and the list holds at most `MAX_EVENTS`.

Who set an event (`DemandEvent.set_by`) decides what it may push out:

- **an operator's** event is always kept; past `MAX_EVENTS` the model's
  event that ends first goes, then, when the list holds the operator's
  only, the operator's that ends first. The dropped ones are named, so
  nobody loses one unknowingly;
- **the model's** event is kept within its share: at most `MODEL_SHARE` of
  the model's own, and no more than the operator's events leave room for.
  Past that its own event that ends first goes; when the operator's fill
  the list, the new one is refused (`EventMerge.refused`) and nothing
  changes. The model never removes nor displaces an operator's event (an
  operator's `update_config` replaces the whole list: that is the
  operator's to do).

Pure and deterministic: `now` is given (a workflow's clock, or the CLI's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from .forecast import DemandEvent

__all__ = ["MAX_EVENTS", "MODEL_SHARE", "EventMerge", "merge_event"]

#: How many known events a config holds (`AgentConfig.demand_events`).
MAX_EVENTS = 20
#: How many of them the model's `expect_demand` may hold.
MODEL_SHARE = 10


@dataclass(frozen=True)
class EventMerge:
    """The list after adding one event, and what happened on the way."""

    events: list[DemandEvent]
    #: False: the event was on the list already, or refused (nothing added).
    added: bool
    #: Events dropped to keep within the limits (the ones that end first).
    dropped: list[DemandEvent] = field(default_factory=list)
    #: Events dropped because they had ended.
    ended: list[DemandEvent] = field(default_factory=list)
    #: Why the model's event was not added (the operator's fill the list).
    refused: str = ""

    def notes(self) -> list[str]:
        """What a caller should say besides "recorded": one line each."""
        lines = []
        if not self.added and not self.refused:
            lines.append("already known: nothing added")
        if self.dropped:
            lines.append(
                f"dropped to keep at most {MAX_EVENTS} events ({MODEL_SHARE} of them "
                "the model's), ending first: " + "; ".join(e.describe() for e in self.dropped)
            )
        return lines


def _same(a: DemandEvent, b: DemandEvent) -> bool:
    """One event for the forecast: the note and the owner do not change what it does."""
    return (a.start, a.end, a.multiplier) == (b.start, b.end, b.multiplier)


def _first_ending(events: Sequence[DemandEvent]) -> DemandEvent:
    return min(events, key=lambda e: (e.end, e.start))


def merge_event(events: Sequence[DemandEvent], new: DemandEvent, now: datetime) -> EventMerge:
    """`events` with `new` added by the rule of its owner (see the module doc);
    their order is kept, the new event last."""
    ended = [e for e in events if e.end <= now]
    kept = [e for e in events if e.end > now]
    if any(_same(e, new) for e in kept):
        return EventMerge(events=kept, added=False, ended=ended)
    dropped: list[DemandEvent] = []
    if new.set_by == "model":
        operators = sum(1 for e in kept if e.set_by == "operator")
        room = min(MODEL_SHARE, MAX_EVENTS - operators)
        if room <= 0:
            return EventMerge(
                events=kept,
                added=False,
                ended=ended,
                refused=f"the list holds {operators} events an operator set, the most it "
                f"keeps is {MAX_EVENTS}, and the model may not displace them",
            )
        while (mine := [e for e in kept if e.set_by == "model"]) and len(mine) >= room:
            first = _first_ending(mine)
            kept.remove(first)
            dropped.append(first)
    else:
        while len(kept) >= MAX_EVENTS:
            models = [e for e in kept if e.set_by == "model"]
            first = _first_ending(models or kept)
            kept.remove(first)
            dropped.append(first)
    return EventMerge(events=[*kept, new], added=True, dropped=dropped, ended=ended)
