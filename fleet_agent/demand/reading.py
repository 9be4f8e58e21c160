"""One reading of a demand source, parsed as hostile input.

A demand source (a Curio node's queue, an HTTP JSON endpoint, the
simulator) says how much work waits, how much is being proved, how much
arrived and was done since it started counting, and when the waiting work
is due. Any of it may be false, absurd or hostile: a NaN, a negative
count, 10^300 arrivals, a million deadlines, a date in the year 9999. So
`parse_reading` checks every field at the edge, the way prover statuses
are checked (fleet_agent/fleet/prover_status.py): numbers must be whole,
finite, non-negative and under a bound; dates RFC 3339 in UTC within
sane years; a bad field refuses the whole reading with one line that
names it (never an exception, never a half-read figure). Text from the
source never passes through: the refusal names the field, and the source
is our own word (`curio`, `http`). Free text would go through
fleet_agent/untrusted.py, the one module for outside text.

Pure: no I/O, no clock; the activities (activities/demand.py) fetch.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from pydantic import ConfigDict, Field

from fleet_agent.untrusted import single_line
from fleet_agent.wire import Wire

__all__ = [
    "MAX_COUNT",
    "MAX_DEADLINES",
    "MAX_LISTED",
    "MAX_TOTAL",
    "DemandReadRequest",
    "DemandReadResult",
    "DemandReading",
    "DemandSample",
    "parse_count",
    "parse_reading",
    "parse_time",
]

#: Items queued or in flight: a snark market node holds a handful.
MAX_COUNT = 10**7
#: Counters since the source started (arrivals, done, late).
MAX_TOTAL = 10**12
#: Deadlines kept, the earliest ones (those that decide the need).
MAX_DEADLINES = 1000
#: Deadlines read at all: past this the list is a flood, not a reading.
MAX_LISTED = 100_000
_MIN_YEAR, _MAX_YEAR = 2000, 2200
_MAX_TIME_CHARS = 64


class _Model(Wire):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DemandReading(_Model):
    """What a demand source said at `as_of` (UTC). Counters (`*_total`) only
    rise while the source runs; a drop means it restarted."""

    as_of: datetime
    queued: int = Field(ge=0, le=MAX_COUNT)
    in_flight: int = Field(ge=0, le=MAX_COUNT)
    arrived_total: int = Field(ge=0, le=MAX_TOTAL)
    done_total: int = Field(0, ge=0, le=MAX_TOTAL)
    late_total: int = Field(0, ge=0, le=MAX_TOTAL)
    #: When queued and in-flight items are due, earliest first, at most
    #: `MAX_DEADLINES`; may be shorter than queued + in_flight (unknown).
    deadlines: list[datetime] = Field(default_factory=list, max_length=MAX_DEADLINES)
    #: The source holds as much as it takes (Curio's queue at its high-water
    #: mark): the demand it shows is a lower bound of the demand there is.
    saturated: bool = False
    #: queued + in_flight count every open item. False: the source listed
    #: only some (Curio's PSListQueue stops at 15 rows), so in_flight is
    #: a lower bound.
    whole: bool = True
    source: str = Field("", max_length=32)

    @property
    def backlog(self) -> int:
        return self.queued + self.in_flight


class DemandSample(_Model):
    """One point of demand history: what the forecast reads."""

    at: datetime
    arrived_total: int = Field(ge=0, le=MAX_TOTAL)
    done_total: int = Field(0, ge=0, le=MAX_TOTAL)
    late_total: int = Field(0, ge=0, le=MAX_TOTAL)
    queued: int = Field(0, ge=0, le=MAX_COUNT)
    in_flight: int = Field(0, ge=0, le=MAX_COUNT)
    saturated: bool = False

    @classmethod
    def of(cls, reading: DemandReading) -> DemandSample:
        return cls(
            at=reading.as_of,
            arrived_total=reading.arrived_total,
            done_total=reading.done_total,
            late_total=reading.late_total,
            queued=reading.queued,
            in_flight=reading.in_flight,
            saturated=reading.saturated,
        )


class DemandReadRequest(_Model):
    """`read_demand`'s input: whose reading (for logs); the source is the worker's."""

    agent_id: str = ""


class DemandReadResult(_Model):
    """A reading, or why there is none (one line). `summary` is what the
    activity's caller shows (workflow history, the console)."""

    reading: DemandReading | None = None
    refusal: str = ""
    source: str = "none"

    @property
    def summary(self) -> str:
        if self.reading is None:
            return f"demand ({self.source}): no reading: {self.refusal}"
        r = self.reading
        sat = ", saturated" if r.saturated else ""
        return (
            f"demand ({self.source}): {r.queued} queued, {r.in_flight} in flight, "
            f"{r.arrived_total} arrived{sat}"
        )


class Refused(ValueError):
    """A field that makes the reading no reading; its message is the one line."""


def parse_count(body: dict[str, Any], key: str, limit: int, *, required: bool = True) -> int:
    """A whole number in [0, `limit`] at `key` (an integral float such as
    3.0 is taken); `Refused` naming `key` otherwise. Absent: 0 unless
    `required`."""
    value = body.get(key)
    if value is None:
        if required:
            raise Refused(f"{key} is missing")
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Refused(f"{key} is not a number")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise Refused(f"{key} is not a whole number")
    if not 0 <= value <= limit:  # Python's ints compare exactly, however long
        raise Refused(f"{key} is out of range (0 to {limit})")
    return int(value)


def parse_time(value: Any, what: str) -> datetime:
    """An RFC 3339 time with its offset, as UTC; `Refused` naming `what` otherwise."""
    if not isinstance(value, str) or len(value) > _MAX_TIME_CHARS:
        raise Refused(f"{what} is not an RFC 3339 time")
    text = value.strip()
    # Go writes nanoseconds; Python reads at most microseconds.
    head, dot, frac = text.partition(".")
    if dot:
        digits = len(frac) - len(frac.lstrip("0123456789"))
        text = f"{head}.{frac[: min(digits, 6)]}{frac[digits:]}" if digits else text
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise Refused(f"{what} is not an RFC 3339 time") from None
    if at.tzinfo is None:
        raise Refused(f"{what} has no UTC offset")
    if not _MIN_YEAR <= at.year <= _MAX_YEAR:
        raise Refused(f"{what} is not between {_MIN_YEAR} and {_MAX_YEAR}")
    return at.astimezone(UTC)


def parse_deadlines(value: Any) -> list[datetime]:
    """The earliest `MAX_DEADLINES` of a JSON list of RFC 3339 times, sorted."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise Refused("deadlines is not a list")
    if len(value) > MAX_LISTED:
        raise Refused(f"deadlines has more than {MAX_LISTED} entries")
    times = [parse_time(item, "a deadline") for item in value]
    times.sort()
    return times[:MAX_DEADLINES]


def parse_reading(body: Any, source: str) -> DemandReading | str:
    """The reading in a generic demand answer (docs/operations/demand-mode.md, "Demand
    mode: sources"), or why it is none, in one line."""
    if not isinstance(body, dict):
        return "the answer is not a JSON object"
    try:
        saturated = body.get("saturated", False)
        if not isinstance(saturated, bool):
            raise Refused("saturated is not true or false")
        return DemandReading(
            as_of=parse_time(body.get("as_of"), "as_of"),
            queued=parse_count(body, "queued", MAX_COUNT),
            in_flight=parse_count(body, "in_flight", MAX_COUNT),
            arrived_total=parse_count(body, "arrived_total", MAX_TOTAL),
            done_total=parse_count(body, "done_total", MAX_TOTAL, required=False),
            late_total=parse_count(body, "late_total", MAX_TOTAL, required=False),
            deadlines=parse_deadlines(body.get("deadlines")),
            saturated=saturated,
            source=single_line(source, 32),
        )
    except Refused as exc:
        return str(exc)
