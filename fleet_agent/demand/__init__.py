"""Demand mode's domain: readings of a demand source, the forecast and the
target rule. Pure: no temporalio, no HTTP (the activities in
activities/demand.py and activities/demand_sources.py read the sources).

- `reading`: `DemandReading` and `DemandSample`, parsed as hostile input;
- `forecast`: the same hours of earlier days blended with the recent rate,
  times the operator's events;
- `events`: adding one known event to a config's list (`merge_event`);
- `target`: `demand_target`, the rule that turns both into proofs/h;
- `sources`: what Curio answers, read without I/O, and the URL check;
- `settings`: `FLEET_DEMAND_SOURCE`, `FLEET_DEMAND_URL`, `FLEET_DEMAND_TOKEN`.
"""

from .events import MAX_EVENTS, EventMerge, merge_event
from .forecast import DemandEvent, Forecast, forecast
from .reading import (
    DemandReading,
    DemandReadRequest,
    DemandReadResult,
    DemandSample,
    parse_reading,
)
from .target import DemandDecision, DemandPolicy, demand_target

__all__ = [
    "MAX_EVENTS",
    "DemandDecision",
    "DemandEvent",
    "DemandPolicy",
    "DemandReadRequest",
    "DemandReadResult",
    "DemandReading",
    "DemandSample",
    "EventMerge",
    "Forecast",
    "demand_target",
    "forecast",
    "merge_event",
    "parse_reading",
]
