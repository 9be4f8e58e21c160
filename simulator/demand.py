"""The simulator's demand: a daily curve of proofs/hour, bursts, arrivals.

`DemandConfig` says how much work the proving node receives: a daily curve
(piecewise linear between ``(hour, proofs_per_hour)`` points, UTC hour of the
sim clock, wrapping at midnight), seeded random bursts and operator-known
daily events that multiply it, and each item's deadline. `arrivals(minute)`
draws one simulated minute's arrivals as a Poisson process from a stream of
its own, seeded by ``(seed, minute)``: the same seed gives the same arrivals
however the clock is stepped. docs/SIMULATOR.md, "Demand: work with deadlines".
"""

from __future__ import annotations

import itertools
import math
import random
import re
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "DEFAULT_DEADLINE_MINUTES",
    "DemandConfig",
    "DemandEvent",
    "demand_from_options",
    "parse_curve",
    "parse_event",
]

#: Curio's snark market: a proof must be delivered within 45 minutes of being
#: taken today, 30 in earlier versions of the provider guide (filecoin-project/
#: curio, documentation/en/experimental-features/Snark-Market.md); the
#: simulator takes the stricter 30 by default.
DEFAULT_DEADLINE_MINUTES = 30.0
_DAY_S = 86_400.0
_HHMM = re.compile(r"^(\d{1,2}):(\d{2})$")


@dataclass(frozen=True, slots=True)
class DemandEvent:
    """An operator-known event: demand times `multiplier` every day from
    `start` to `end` (UTC time of day, seconds; `end` < `start` wraps midnight)."""

    start_s: float
    end_s: float
    multiplier: float

    def covers(self, t: float) -> bool:
        day = t % _DAY_S
        if self.start_s <= self.end_s:
            return self.start_s <= day < self.end_s
        return day >= self.start_s or day < self.end_s


@dataclass(frozen=True, slots=True)
class DemandConfig:
    """The work source's settings (JSON: `to_dict` / `from_dict`)."""

    #: ``(hour, proofs_per_hour)`` points, hours in [0, 24), sorted; linear between
    #: them, wrapping from the last to the first over midnight. One point: flat.
    curve: tuple[tuple[float, float], ...] = ((0.0, 100.0),)
    #: Random bursts per simulated day (Poisson); each lasts 0.5-1.5 x
    #: `burst_minutes` and multiplies demand by 1 + (`burst_multiplier` - 1) x U(0.5, 1).
    burst_rate_per_day: float = 0.0
    burst_minutes: float = 60.0
    burst_multiplier: float = 3.0
    events: tuple[DemandEvent, ...] = field(default_factory=tuple)
    #: Each item must be proved within this many minutes of its arrival.
    deadline_minutes: float = DEFAULT_DEADLINE_MINUTES
    #: An item still queued this long after its arrival is dropped as expired
    #: (the node gives the work up); 0: never. Default: twice the deadline
    #: (`from_dict` keeps it so when only the deadline is given).
    expire_minutes: float = 2 * DEFAULT_DEADLINE_MINUTES
    #: The arrivals' seed (None: the market's).
    seed: int | None = None

    def __post_init__(self) -> None:
        if not self.curve:
            raise ValueError("a demand curve needs at least one (hour, rate) point")
        hours = [h for h, _ in self.curve]
        if hours != sorted(hours) or len(set(hours)) != len(hours):
            raise ValueError("curve hours must be distinct and ascending")
        for h, r in self.curve:
            if not 0 <= h < 24 or r < 0 or not math.isfinite(r):
                raise ValueError("curve points are (hour in [0, 24), proofs/hour >= 0)")
        if self.deadline_minutes <= 0:
            raise ValueError("deadline_minutes must be > 0")
        if min(self.burst_rate_per_day, self.burst_minutes, self.expire_minutes) < 0:
            raise ValueError("burst_rate_per_day, burst_minutes and expire_minutes are >= 0")
        if self.burst_multiplier < 1 or any(e.multiplier < 0 for e in self.events):
            raise ValueError("burst_multiplier is >= 1 and event multipliers >= 0")

    # ------------------------------------------------------------- rates

    def base_rate(self, t: float) -> float:
        """The curve's proofs/hour at sim time `t` (no bursts or events)."""
        hour = (t % _DAY_S) / 3600.0
        pts = self.curve
        if len(pts) == 1:
            return pts[0][1]
        for (h0, r0), (h1, r1) in itertools.pairwise(pts):
            if h0 <= hour < h1:
                return r0 + (r1 - r0) * (hour - h0) / (h1 - h0)
        # Between the last point and the first, across midnight.
        (h0, r0), (h1, r1) = pts[-1], pts[0]
        span = h1 + 24.0 - h0
        into = hour - h0 if hour >= h0 else hour + 24.0 - h0
        return r0 + (r1 - r0) * into / span

    def bursts(self, day: int, seed: int) -> list[tuple[float, float, float]]:
        """The random bursts of sim day `day` (days since the epoch):
        ``(start, end, multiplier)``, from a stream of their own."""
        if self.burst_rate_per_day <= 0:
            return []
        rng = random.Random(f"{self._seed(seed)}:demand-bursts:{day}")
        out = []
        for _ in range(_poisson(rng, self.burst_rate_per_day)):
            start = day * _DAY_S + rng.random() * _DAY_S
            length = self.burst_minutes * 60.0 * rng.uniform(0.5, 1.5)
            mult = 1.0 + (self.burst_multiplier - 1.0) * rng.uniform(0.5, 1.0)
            out.append((start, start + length, mult))
        return out

    def rate(self, t: float, seed: int) -> float:
        """Proofs/hour expected at sim time `t`: the curve times every burst
        and event covering `t` (bursts of the day before may run past midnight)."""
        rate = self.base_rate(t)
        day = int(t // _DAY_S)
        for d in (day - 1, day):
            for start, end, mult in self.bursts(d, seed):
                if start <= t < end:
                    rate *= mult
        for event in self.events:
            if event.covers(t):
                rate *= event.multiplier
        return rate

    def arrivals(self, minute: int, seed: int) -> list[float]:
        """Arrival times in the sim minute [60 x `minute`, + 60), sorted: a
        Poisson count at the minute's mean rate, times uniform within it."""
        start = minute * 60.0
        mean = self.rate(start + 30.0, seed) / 60.0
        if mean <= 0:
            return []
        rng = random.Random(f"{self._seed(seed)}:demand:{minute}")
        return sorted(start + 60.0 * rng.random() for _ in range(_poisson(rng, mean)))

    def _seed(self, market_seed: int) -> int:
        return self.seed if self.seed is not None else market_seed

    # -------------------------------------------------------------- JSON

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["curve"] = [list(p) for p in self.curve]
        data["events"] = [
            {"start": _hhmm(e.start_s), "end": _hhmm(e.end_s), "multiplier": e.multiplier}
            for e in self.events
        ]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DemandConfig:
        """Settings from JSON; unknown keys or bad values raise ValueError."""
        known = {
            "curve",
            "burst_rate_per_day",
            "burst_minutes",
            "burst_multiplier",
            "events",
            "deadline_minutes",
            "expire_minutes",
            "seed",
        }
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown demand settings {sorted(unknown)}")
        kw: dict[str, Any] = {}
        if "curve" in data:
            kw["curve"] = parse_curve(data["curve"])
        if "events" in data:
            raw = data["events"]
            if not isinstance(raw, list):
                raise ValueError("events is a list")
            kw["events"] = tuple(parse_event(e) for e in raw)
        for name in known - {"curve", "events", "seed"}:
            if name in data:
                kw[name] = _number(data[name], name)
        if "deadline_minutes" in kw and "expire_minutes" not in kw:
            kw["expire_minutes"] = 2 * kw["deadline_minutes"]
        if data.get("seed") is not None:
            seed = data["seed"]
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise ValueError("seed is an integer")
            kw["seed"] = seed
        return cls(**kw)


def parse_curve(raw: Any) -> tuple[tuple[float, float], ...]:
    """A curve from ``[[hour, rate], ...]`` or the CLI's ``"0:100,6:300,14:800"``."""
    if isinstance(raw, str):
        raw = [part.split(":") for part in raw.split(",") if part.strip()]
    if not isinstance(raw, list) or not all(isinstance(p, list | tuple) for p in raw):
        raise ValueError('curve is [[hour, proofs_per_hour], ...] or "hour:rate,..."')
    points = []
    for p in raw:
        if len(p) != 2:
            raise ValueError("each curve point is (hour, proofs_per_hour)")
        points.append((_number(p[0], "curve hour"), _number(p[1], "curve rate")))
    return tuple(sorted(points))


def parse_event(raw: Any) -> DemandEvent:
    """An event from ``{"start": "14:00", "end": "16:00", "multiplier": 3}``
    or the CLI's ``"14:00-16:00x3"``."""
    if isinstance(raw, str):
        m = re.fullmatch(r"\s*(\d{1,2}:\d{2})-(\d{1,2}:\d{2})[x*]([\d.]+)\s*", raw)
        if m is None:
            raise ValueError(f'an event is "HH:MM-HH:MMxMULTIPLIER", not {raw!r}')
        raw = {"start": m[1], "end": m[2], "multiplier": float(m[3])}
    if not isinstance(raw, dict) or set(raw) != {"start", "end", "multiplier"}:
        raise ValueError('an event is {"start": "HH:MM", "end": "HH:MM", "multiplier": n}')
    return DemandEvent(
        _seconds_of_day(raw["start"]),
        _seconds_of_day(raw["end"]),
        _number(raw["multiplier"], "event multiplier"),
    )


def _seconds_of_day(raw: Any) -> float:
    m = _HHMM.match(raw) if isinstance(raw, str) else None
    if m is None or int(m[1]) > 24 or int(m[2]) > 59:
        raise ValueError(f"a time of day is HH:MM (UTC), not {raw!r}")
    return (int(m[1]) * 3600 + int(m[2]) * 60) % _DAY_S


def _hhmm(seconds: float) -> str:
    return f"{int(seconds // 3600):02d}:{int(seconds % 3600 // 60):02d}"


def _number(value: Any, name: str) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number") from None
    if isinstance(value, bool) or not math.isfinite(out):
        raise ValueError(f"{name} must be a number")
    return out


def _poisson(rng: random.Random, mean: float) -> int:
    """A Poisson draw (Knuth's method, in pieces of mean <= 30 so that
    exp(-mean) never underflows)."""
    count = 0
    while mean > 0:
        piece = min(mean, 30.0)
        mean -= piece
        limit, p = math.exp(-piece), rng.random()
        while p > limit:
            count += 1
            p *= rng.random()
    return count


def demand_from_options(
    curve: str | None,
    events: list[str] | None = None,
    burst_rate_per_day: float | None = None,
    deadline_minutes: float | None = None,
    seed: int | None = None,
) -> DemandConfig | None:
    """The CLI's ``--demand-*`` options as settings; None when none is given
    (the work source stays `Faults.work_share`). ValueError on a bad one."""
    given = {
        "curve": curve,
        "events": events or None,
        "burst_rate_per_day": burst_rate_per_day,
        "deadline_minutes": deadline_minutes,
        "seed": seed,
    }
    settings = {k: v for k, v in given.items() if v is not None}
    if not settings:
        return None
    return DemandConfig.from_dict(settings)
