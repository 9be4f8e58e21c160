"""The `## Demand` section of a run's message in demand mode
(AgentConfig.target_mode = "demand"): who sets the target, the monitor's
latest reading of demand and its age, why the target is what it is, and
the operator's known events still ahead.

In fixed mode there is no section, so the message's bytes are those of
before demand mode. The system prompt is not touched either way: it opens
the cached prefix (fleet_agent/llm/prompt.py). Pure: the point is read from
the store by `load_context` (activities/runlog.py).
"""

from __future__ import annotations

from datetime import datetime

from fleet_agent.demand.point import DemandPoint
from fleet_agent.models import AgentConfig
from fleet_agent.untrusted import single_line

__all__ = ["demand_section", "point_age"]

#: The reason as the model reads it: the rule's own words, one line.
_REASON_CHARS = 600


def point_age(point: DemandPoint, now: datetime) -> str:
    """`as of 14:05, 3 min ago` (`now` of the run, not of the worker's clock)."""
    minutes = max(0, round((now - point.at).total_seconds() / 60))
    return f"as of {point.at:%H:%M}, {minutes} min ago"


def demand_section(config: AgentConfig, point: DemandPoint | None, now: datetime) -> str:
    """The section's text with its heading; "" in fixed mode."""
    if config.target_mode != "demand":
        return ""
    lines = [
        "## Demand",
        f"The target is set by demand mode within [{config.min_target:g}, "
        f"{config.max_target:g}] proofs/h: hold it like any target and do not try to "
        "change it (the monitor moves it as demand moves).",
    ]
    if point is None:
        lines.append("- latest reading: none yet (the target holds until the first one)")
    else:
        lines.append(f"- latest reading ({point_age(point, now)}): {point.line()}")
        if point.reason:
            lines.append(f"- why: {single_line(point.reason, _REASON_CHARS)}")
    ahead = [e for e in config.demand_events if e.end > now]
    if ahead:
        lines.append("- known events: " + "; ".join(e.describe() for e in ahead))
    return "\n".join(lines)
