"""The base of every model that crosses into a workflow: it always decodes.

A workflow task that cannot decode its input fails, and Temporal retries it
forever: one hostile value stops the workflow for good. A host once chose a
busy-time step of 5e-324, the measured rate became `inf`, the data converter
wrote it as `null`, and the monitor failed to decode its own snapshot on every
retry. So every model that enters a workflow (workflow inputs, signals,
updates, queries, activity and child results, the state handed to
continue-as-new) derives from `Wire`, which refuses at validation what would
not come back unchanged or would break the workflow code that reads it:

* floats that are not finite (`inf`, `NaN`), or beyond ±`MAX_FLOAT`;
* integers beyond ±`MAX_INT` (2^53 - 1: the Web UI and the temporal CLI read
  JSON numbers as doubles, and a 400-digit count breaks float arithmetic);
* times outside [`EARLIEST_YEAR`, `LATEST_YEAR`): year 1 at +01:00 raises
  `OverflowError` from `astimezone`, inside whatever workflow code reads it;
  and times without an offset (a naive and an aware time cannot be
  compared, which raises in the workflow; the store refuses them too:
  fleet_agent/store/timestamps.py). Every time is held in UTC;
* text longer than `MAX_TEXT` characters (a field may set its own, lower or
  higher, `max_length`), or holding a lone surrogate (no UTF-8 encoder takes
  one, so the payload could not be sent).

What a model refuses fails the activity that built it (retried, visible in
the Web UI) or is refused at the edge (a signal's `status.rejected`, an
update's error, a tool's error result); it never reaches a workflow task.
tests/workflows/test_wire_models.py finds every such model by reflection and feeds its
fields hostile values: each is refused, or round-trips unchanged through the
project's data converter.

Temporal-free and cheap: the checks run in Python only for values that are
not plain ASCII text or booleans.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, date, datetime
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

__all__ = [
    "EARLIEST_YEAR",
    "LATEST_YEAR",
    "MAX_FLOAT",
    "MAX_INT",
    "MAX_TEXT",
    "Wire",
    "check_wire_value",
]

#: Integers a double holds exactly (JavaScript's `Number.MAX_SAFE_INTEGER`).
MAX_INT = 2**53 - 1
#: Larger than any count, price, rate or time of ours, and far from overflow
#: when multiplied by another (1e15 × 1e15 is 1e30, not `inf`).
MAX_FLOAT = 1e15
#: Times this code can meet: an offset moves a time by at most a day, so
#: years within these bounds never overflow when converted.
EARLIEST_YEAR = 1970
LATEST_YEAR = 2200
#: Characters in one text, by default: 256 Ki is within the server's 512 KB
#: payload limit for ASCII text; a field that carries more says so.
MAX_TEXT = 256 * 1024


def check_wire_value(value: Any) -> Any:
    """`value` as a workflow may hold it, or `ValueError` saying why not.
    Walks lists, tuples, sets and dicts; a nested model has checked itself.
    Returns `value`, its times in UTC."""
    if value is None or isinstance(value, bool | Enum | BaseModel):
        return value
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError("text holds a lone surrogate (not valid Unicode)") from None
        return value
    if isinstance(value, int):
        if not -MAX_INT <= value <= MAX_INT:
            raise ValueError(f"integer out of range (at most ±{MAX_INT})")
        return value
    if isinstance(value, float):
        if not math.isfinite(value) or not -MAX_FLOAT <= value <= MAX_FLOAT:
            raise ValueError(f"number out of range (finite, at most ±{MAX_FLOAT:g})")
        return value
    if isinstance(value, datetime):
        if not EARLIEST_YEAR <= value.year < LATEST_YEAR:
            raise ValueError(f"time out of range (years {EARLIEST_YEAR} to {LATEST_YEAR - 1})")
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("a time needs a UTC offset (e.g. 2026-12-07T14:00:00Z)")
        # In UTC: an offset of a fraction of a second does not survive ISO 8601.
        # The range holds in UTC too: 1970-01-01T00:00+00:00:00.000001 is
        # 1969 there, and read back it would be refused.
        utc = value.astimezone(UTC)
        if not EARLIEST_YEAR <= utc.year < LATEST_YEAR:
            raise ValueError(f"time out of range (years {EARLIEST_YEAR} to {LATEST_YEAR - 1})")
        return utc
    if isinstance(value, date):
        if not EARLIEST_YEAR <= value.year < LATEST_YEAR:
            raise ValueError(f"date out of range (years {EARLIEST_YEAR} to {LATEST_YEAR - 1})")
        return value
    if isinstance(value, list):
        return [check_wire_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(check_wire_value(v) for v in value)
    if isinstance(value, set | frozenset):
        return type(value)(check_wire_value(v) for v in value)
    if isinstance(value, Mapping):
        return {check_wire_value(k): check_wire_value(v) for k, v in value.items()}
    return value


class Wire(BaseModel):
    """Base of every model that enters a workflow: no `inf` or `NaN`
    (`allow_inf_nan=False`), bounded numbers, times and text (see the module
    doc). Subclasses add their own config; pydantic merges it with this."""

    model_config = ConfigDict(allow_inf_nan=False, str_max_length=MAX_TEXT)

    @field_validator("*", mode="after")
    @classmethod
    def _within_wire_bounds(cls, value: Any) -> Any:
        return check_wire_value(value)
