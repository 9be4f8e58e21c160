"""`fleet-agent expect`: known demand events from the command line.

`expect 3x 14:00-16:00 [--date YYYY-MM-DD] [--note TEXT]` adds one event
(times UTC; without --date today, or tomorrow when the window has ended
today; a window that ends before it starts ends the next day) to the
agent's `demand_events` through `update_config`, by the rule the model's
`expect_demand` follows (fleet_agent/demand/events.py): ended events go,
the same event is not added twice, at most 20 are kept. The event is the
operator's: past 20 the model's event that ends first is dropped (then,
with only the operator's left, theirs), and named. `--list` shows them
(the model's marked), `--clear` removes them all, the model's and the
operator's. The config is read from the status query and written whole: a
change made between the two (the model's own `expect_demand`) is lost, and
the next `--list` shows it.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime, time, timedelta

from pydantic import ValidationError

from fleet_agent.demand.events import merge_event
from fleet_agent.demand.forecast import DemandEvent
from fleet_agent.models import AgentConfig
from starter.agent_client import AgentClient, UsageError, validation_message

__all__ = ["event_from_args", "events_table", "expect", "parse_multiplier", "parse_window"]

_MULTIPLIER = re.compile(r"^\s*[x×]?\s*(\d+(?:\.\d+)?)\s*[x×]?\s*$", re.IGNORECASE)
_WINDOW = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")
_EXAMPLE = "e.g. `fleet-agent expect 3x 14:00-16:00`"


def parse_multiplier(text: str) -> float:
    """`3x`, `x3`, `1.5×`, `3`: more than 0, at most 100."""
    match = _MULTIPLIER.match(text)
    value = float(match.group(1)) if match else 0.0
    if not match or not 0 < value <= 100:
        raise UsageError(f"expected a multiplier such as 3x (above 0, at most 100), got {text!r}")
    return value


def _clock(hours: str, minutes: str, text: str) -> time:
    h, m = int(hours), int(minutes)
    if h > 23 or m > 59:
        raise UsageError(f"expected times as HH:MM-HH:MM (UTC), got {text!r}")
    return time(h, m, tzinfo=UTC)


def parse_window(text: str, day: date | None, now: datetime) -> tuple[datetime, datetime]:
    """`14:00-16:00` (UTC) on `day`; without one today, or tomorrow when it
    has ended by `now`. `22:00-02:00` ends the next day."""
    match = _WINDOW.match(text)
    if not match:
        raise UsageError(f"expected times as HH:MM-HH:MM (UTC), got {text!r}")
    begin = _clock(match.group(1), match.group(2), text)
    finish = _clock(match.group(3), match.group(4), text)

    def on(d: date) -> tuple[datetime, datetime]:
        start, end = datetime.combine(d, begin), datetime.combine(d, finish)
        return start, end if end > start else end + timedelta(days=1)

    if day is not None:
        start, end = on(day)
        if end <= now:
            raise UsageError(f"that window ended already ({end:%Y-%m-%d %H:%M} UTC)")
        return start, end
    start, end = on(now.date())
    return on(now.date() + timedelta(days=1)) if end <= now else (start, end)


def parse_date(text: str) -> date:
    """--date: YYYY-MM-DD."""
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"expected --date as YYYY-MM-DD, got {text!r}") from None


def event_from_args(
    multiplier: str, window: str, day: str | None, note: str | None, now: datetime
) -> DemandEvent:
    """The event the command line asks for, or a one-line UsageError."""
    times = parse_window(window, None if day is None else parse_date(day), now)
    try:
        return DemandEvent(
            start=times[0], end=times[1], multiplier=parse_multiplier(multiplier), note=note or ""
        )
    except ValidationError as exc:
        raise UsageError(f"invalid event: {validation_message(exc)}") from None


def events_table(config: AgentConfig, now: datetime) -> str:
    """The known events, by start, with whether they are ahead, on or over."""
    if not config.demand_events:
        lines = ["no known demand events"]
    else:
        lines = []
        for e in sorted(config.demand_events, key=lambda e: (e.start, e.end)):
            when = "ended" if e.end <= now else "now" if e.start <= now else "ahead"
            lines.append(f"{when:<6} {e.describe()}")
    if config.target_mode != "demand":
        lines.append(_FIXED)
    return "\n".join(lines)


_FIXED = (
    "note: target_mode is fixed: events act only in demand mode "
    "(`fleet-agent config --set target_mode=demand`)"
)


def _dump(config: AgentConfig) -> None:
    print(json.dumps([e.model_dump(mode="json") for e in config.demand_events], indent=2))


async def expect(
    agent: AgentClient,
    multiplier: str | None,
    window: str | None,
    day: str | None,
    note: str | None,
    listing: bool,
    clear: bool,
    as_json: bool,
) -> int:
    """Add one event, or --list / --clear them (see the module doc)."""
    adding = multiplier is not None or window is not None or day is not None or note is not None
    if listing + clear + adding > 1:
        raise UsageError("give an event, --list or --clear: one of them")
    now = datetime.now(UTC)
    if clear:
        before = len((await agent.status()).config.demand_events)
        config = await agent.update_config({"demand_events": []})
        print(f"cleared {before} known demand event(s)")
        return 0
    if listing:
        config = (await agent.status()).config
        if as_json:
            _dump(config)
        else:
            print(events_table(config, now))
        return 0
    if multiplier is None or window is None:
        raise UsageError(f"give a multiplier and a UTC window, {_EXAMPLE}, or --list / --clear")
    event = event_from_args(multiplier, window, day, note, now)
    merged = merge_event((await agent.status()).config.demand_events, event, now)
    if merged.added:
        events = [e.model_dump(mode="json") for e in merged.events]
        config = await agent.update_config({"demand_events": events})
    else:
        config = (await agent.status()).config
    if as_json:
        _dump(config)
        return 0
    verb = "recorded" if merged.added else "already known"
    print(f"{verb}: {event.describe()}; {len(config.demand_events)} known event(s)")
    for dropped in merged.dropped:
        print(f"dropped to keep at most 20 (it ends first): {dropped.describe()}")
    if config.target_mode != "demand":
        print(_FIXED)
    return 0
