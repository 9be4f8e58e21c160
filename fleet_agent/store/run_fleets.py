"""The fleet as each run saw it, read back from the run's context message.

`FleetSnapshot.to_text` writes one summary line and a JSON list of instances
into every run's first message (fleet_agent/llm/prompt.py, `## Fleet`). The store
keeps no other history of capacity, so the console's plot and its fleet
table read that text back. tests/console/test_console_app.py round-trips
`FleetSnapshot.to_text` through these parsers, so a change of the format
fails a test instead of emptying the plot.
"""

from __future__ import annotations

import json
import re
from datetime import datetime

from pydantic import BaseModel, ValidationError

from fleet_agent.fleet.snapshot import FleetInstance

__all__ = ["FleetPoint", "fleet_point", "fleet_rows"]

_SUMMARY = re.compile(
    r"capacity (?P<capacity>[\d.]+) proofs/h running, (?P<expected>[\d.]+) once loading "
    r"ones are up; target (?P<target>[\d.]+) \(gap [^)]*\); spend \$(?P<dph>[\d.]+)/h"
)
_ROWS = re.compile(r"```json\n(?P<rows>\[.*?\])\n```", re.DOTALL)


class FleetPoint(BaseModel):
    """The fleet's totals at the start of one run."""

    at: datetime
    run: int
    capacity: float
    expected: float
    target: float
    dph: float


def fleet_point(text: str, at: datetime, run: int) -> FleetPoint | None:
    """The totals in a context message; None where the fleet was unavailable."""
    found = _SUMMARY.search(text)
    if found is None:
        return None
    return FleetPoint(
        at=at,
        run=run,
        capacity=float(found["capacity"]),
        expected=float(found["expected"]),
        target=float(found["target"]),
        dph=float(found["dph"]),
    )


def fleet_rows(text: str) -> list[FleetInstance] | None:
    """The instances in a context message; None where it lists none readable."""
    if _SUMMARY.search(text) is None:
        return None
    found = _ROWS.search(text)
    if found is None:
        return None
    try:
        rows = json.loads(found["rows"])
        return [FleetInstance.model_validate(row) for row in rows]
    except (ValueError, ValidationError):
        return None
