"""The console's 24 h plot as inline SVG, drawn on the server: capacity
(running and expected) against the target, demand beside them (in demand
mode: arrivals/h, the forecast and the target demand asks for, one point
per monitor poll), and the fleet's $/h; in market mode two panels more: the
business's revenue, cost and profit in $/h, and the work slots (total and
used) against the GPUs rented, one point per monitor poll.

Pure: a `Trend` in, SVG text out; no JavaScript, no plotting library. Capacity
and target are step lines (each holds from one run's start to the next);
$/h is a bar per UTC hour from the spend ledger (an hour's dollars are its
average $/h; the current hour is scaled by the part of it elapsed).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape

from fleet_agent.market.point import MarketPoint
from starter.console.data import Trend

__all__ = ["dph_bars", "trend_svg"]

WIDTH, HEIGHT = 720, 300
_LEFT, _RIGHT, _TOP, _MID, _GAP, _BOTTOM = 56, 12, 16, 170, 28, 276
_HOUR = timedelta(hours=1)
#: Each market panel's height (the gap above it as the $/h panel's).
_PANEL = 110


@dataclass(frozen=True)
class _Axis:
    start: datetime
    end: datetime

    def x(self, at: datetime) -> float:
        span = (self.end - self.start).total_seconds() or 1.0
        share = (at - self.start).total_seconds() / span
        return _LEFT + max(0.0, min(1.0, share)) * (WIDTH - _LEFT - _RIGHT)


def _y(value: float, top_value: float, top: float, bottom: float) -> float:
    return bottom - (value / top_value) * (bottom - top) if top_value > 0 else bottom


def _nice(value: float) -> float:
    """A round axis maximum at or above `value` (1, 2 or 5 × 10^n)."""
    if value <= 0:
        return 1.0
    step = 10 ** (len(str(int(value))) - 1)
    for m in (1, 2, 5, 10):
        if m * step >= value:
            return float(m * step)
    return float(10 * step)


def _steps(points: Sequence[tuple[datetime, float]], axis: _Axis, top: float, y0: float) -> str:
    """`x,y` pairs of a step line that holds each value until the next point."""
    return _steps_to(points, axis, lambda v: _y(v, top, _TOP, y0))


def _steps_to(
    points: Sequence[tuple[datetime, float]], axis: _Axis, to_y: Callable[[float], float]
) -> str:
    """`_steps` with the value's height given by `to_y` (any panel)."""
    coords: list[tuple[float, float]] = []
    for at, value in points:
        x = axis.x(at)
        if coords:
            coords.append((x, coords[-1][1]))
        coords.append((x, to_y(value)))
    if coords:
        coords.append((axis.x(axis.end), coords[-1][1]))
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)


def dph_bars(trend: Trend) -> list[tuple[datetime, float]]:
    """(hour, average $/h) per UTC hour in the window; the current hour by its elapsed part."""
    bars = []
    for h in trend.hours:
        elapsed = min(_HOUR, max(trend.end - h.hour, timedelta(minutes=1)))
        bars.append((h.hour, h.usd / (elapsed / _HOUR)))
    return bars


def trend_svg(trend: Trend) -> str:
    """The plot; an empty window says so inside the frame."""
    axis = _Axis(trend.start, trend.end)
    # Market mode adds its panels below $/h; without points the plot is as before.
    height = HEIGHT + 2 * (_GAP + _PANEL) if trend.market else HEIGHT
    label = (
        "capacity against target, $/h, and the market's $/h and slots, over the last 24 hours"
        if trend.market
        else "capacity against target, and $/h, over the last 24 hours"
    )
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'role="img" aria-label="{label}" class="trend">'
    ]
    demand = _demand_series(trend)
    cap_top = _nice(
        max(
            [max(p.capacity, p.expected, p.target) for p in trend.points]
            + [v for _, _, series in demand for _, v in series]
            or [0]
        )
    )
    parts.append(_frame(_TOP, _MID, f"{cap_top:g}", "proofs/h"))
    if trend.points:
        for name, css in (("target", "target"), ("expected", "expected"), ("capacity", "capacity")):
            series = [(p.at, float(getattr(p, name))) for p in trend.points]
            coords = _steps(series, axis, cap_top, _MID)
            parts.append(f'<polyline class="{css}" fill="none" points="{coords}"/>')
    elif not trend.demand:
        parts.append(_note((_TOP + _MID) / 2, "no run in the last 24 h"))
    for css, text, series in demand:
        coords = _steps(series, axis, cap_top, _MID)
        parts.append(
            f'<polyline class="{css}" fill="none" points="{coords}"><title>{escape(text)}'
            "</title></polyline>"
        )
    bars = dph_bars(trend)
    dph_top = _nice(max([v for _, v in bars] or [0]))
    y_top = _MID + _GAP
    parts.append(_frame(y_top, _BOTTOM, f"${dph_top:g}", "$/h"))
    for hour, value in bars:
        x0, x1 = axis.x(hour), axis.x(hour + _HOUR)
        y = _y(value, dph_top, y_top, _BOTTOM)
        parts.append(
            f'<rect class="dph" x="{x0:.1f}" y="{y:.1f}" width="{max(x1 - x0 - 1, 1):.1f}" '
            f'height="{_BOTTOM - y:.1f}"><title>{hour:%H}:00 UTC ${value:.2f}/h</title></rect>'
        )
    if not bars:
        parts.append(_note((y_top + _BOTTOM) / 2, "no spend in the last 24 h"))
    if trend.market:
        parts += _market_panels(trend.market, axis)
    parts.append(_time_ticks(axis, height))
    parts.append(_legend(_LEGEND))
    if demand:
        parts.append(_legend([(css, text) for css, text, _ in demand], row=1))
    parts.append("</svg>")
    return "".join(parts)


def _frame(top: float, bottom: float, top_label: str, unit: str, bottom_label: str = "0") -> str:
    return (
        f'<line class="axis" x1="{_LEFT}" y1="{bottom}" x2="{WIDTH - _RIGHT}" y2="{bottom}"/>'
        f'<line class="axis" x1="{_LEFT}" y1="{top}" x2="{_LEFT}" y2="{bottom}"/>'
        f'<line class="grid" x1="{_LEFT}" y1="{top}" x2="{WIDTH - _RIGHT}" y2="{top}"/>'
        f'<text class="label" x="{_LEFT - 4}" y="{top + 4}" text-anchor="end">'
        f"{escape(top_label)}</text>"
        f'<text class="label" x="{_LEFT - 4}" y="{bottom}" text-anchor="end">'
        f"{escape(bottom_label)}</text>"
        f'<text class="label" x="{_LEFT - 4}" y="{(top + bottom) / 2}" text-anchor="end">'
        f"{escape(unit)}</text>"
    )


def _note(y: float, text: str) -> str:
    return (
        f'<text class="note" x="{(WIDTH + _LEFT) / 2}" y="{y}" text-anchor="middle">'
        f"{escape(text)}</text>"
    )


def _time_ticks(axis: _Axis, height: int = HEIGHT) -> str:
    first = axis.start.replace(minute=0, second=0, microsecond=0) + _HOUR
    ticks = []
    at = first
    while at <= axis.end:
        if at.hour % 4 == 0:
            ticks.append(
                f'<text class="label" x="{axis.x(at):.1f}" y="{height - 8}" '
                f'text-anchor="middle">{at:%H}:00</text>'
            )
        at += _HOUR
    return "".join(ticks)


_LEGEND = [("capacity", "capacity running"), ("expected", "expected"), ("target", "target")]


def _legend(items: Sequence[tuple[str, str]], row: int = 0, top: float = _TOP) -> str:
    y = top + 12 + 14 * row
    return "".join(
        f'<text class="legend {css}" x="{_LEFT + 8 + i * 130}" y="{y}">— {escape(text)}</text>'
        for i, (css, text) in enumerate(items)
    )


def _demand_series(trend: Trend) -> list[tuple[str, str, list[tuple[datetime, float]]]]:
    """(css class, legend, points) of each demand line with points: arrivals
    per hour (none while history is too short), the forecast, and the target
    demand mode asks for. None without readings."""
    if not trend.demand:
        return []
    lines = [
        (
            "demand-arrivals",
            "arrivals/h",
            [(p.at, p.recent_per_h) for p in trend.demand if p.recent_per_h is not None],
        ),
        ("demand-forecast", "forecast", [(p.at, p.forecast_per_h) for p in trend.demand]),
        ("demand-target", "demand target", [(p.at, p.target_per_h) for p in trend.demand]),
    ]
    return [line for line in lines if line[2]]


def _line(css: str, text: str, coords: str) -> str:
    return (
        f'<polyline class="{css}" fill="none" points="{coords}"><title>{escape(text)}'
        "</title></polyline>"
    )


def _market_panels(market: Sequence[MarketPoint], axis: _Axis) -> list[str]:
    """Below $/h: the business's revenue, cost and profit in $/h (profit may
    be below 0: the panel then reaches down to its lowest, with a 0 line),
    and the slots, total and used, against the GPUs rented. Revenue and
    profit are left out where the point had no FIL price."""
    parts: list[str] = []
    top = _BOTTOM + _GAP
    bottom = top + _PANEL
    money = [
        (
            "market-revenue",
            "revenue $/h",
            [(p.at, p.revenue_usd_per_h) for p in market if p.revenue_usd_per_h is not None],
        ),
        ("market-cost", "cost $/h", [(p.at, p.cost_usd_per_h) for p in market]),
        (
            "market-profit",
            "profit $/h",
            [(p.at, p.profit_usd_per_h) for p in market if p.profit_usd_per_h is not None],
        ),
    ]
    values = [v for _, _, series in money for _, v in series]
    hi = _nice(max([*values, 0.0]))
    lo = -_nice(-min(values)) if min(values) < 0 else 0.0

    def money_y(value: float) -> float:
        return bottom - (value - lo) / (hi - lo) * (bottom - top)

    parts.append(_frame(top, bottom, f"${hi:g}", "$/h", f"-${-lo:g}" if lo < 0 else "0"))
    if lo < 0:
        zero = money_y(0.0)
        parts.append(
            f'<line class="zero" x1="{_LEFT}" y1="{zero:.1f}" x2="{WIDTH - _RIGHT}" '
            f'y2="{zero:.1f}"/>'
            f'<text class="label" x="{_LEFT - 4}" y="{zero + 4:.1f}" text-anchor="end">0</text>'
        )
    shown = [(css, text, series) for css, text, series in money if series]
    for css, text, series in shown:
        parts.append(_line(css, text, _steps_to(series, axis, money_y)))
    parts.append(_legend([(css, text) for css, text, _ in shown], top=top))
    top, bottom = bottom + _GAP, bottom + _GAP + _PANEL
    slots = [
        ("market-slots-total", "slots", [(p.at, float(p.slots_total)) for p in market]),
        ("market-slots-used", "slots used", [(p.at, float(p.slots_used)) for p in market]),
        ("market-gpus", "GPUs", [(p.at, float(p.gpus)) for p in market]),
    ]
    slots_top = _nice(max(v for _, _, series in slots for _, v in series))
    parts.append(_frame(top, bottom, f"{slots_top:g}", "slots"))
    for css, text, series in slots:
        coords = _steps_to(series, axis, lambda v: _y(v, slots_top, top, bottom))
        parts.append(_line(css, text, coords))
    parts.append(_legend([(css, text) for css, text, _ in slots], top=top))
    return parts
