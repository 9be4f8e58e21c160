"""The console's 24 h plot as inline SVG, drawn on the server: capacity
(running and expected) against the target, demand beside them (in demand
mode: arrivals/h, the forecast and the target demand asks for, one point
per monitor poll), and the fleet's $/h.

Pure: a `Trend` in, SVG text out; no JavaScript, no plotting library. Capacity
and target are step lines (each holds from one run's start to the next);
$/h is a bar per UTC hour from the spend ledger (an hour's dollars are its
average $/h; the current hour is scaled by the part of it elapsed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape

from starter.console.data import Trend

__all__ = ["dph_bars", "trend_svg"]

WIDTH, HEIGHT = 720, 300
_LEFT, _RIGHT, _TOP, _MID, _GAP, _BOTTOM = 56, 12, 16, 170, 28, 276
_HOUR = timedelta(hours=1)


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
    coords: list[tuple[float, float]] = []
    for at, value in points:
        x = axis.x(at)
        if coords:
            coords.append((x, coords[-1][1]))
        coords.append((x, _y(value, top, _TOP, y0)))
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
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        'role="img" aria-label="capacity against target, and $/h, over the last 24 hours" '
        'class="trend">'
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
    parts.append(_time_ticks(axis))
    parts.append(_legend(_LEGEND))
    if demand:
        parts.append(_legend([(css, text) for css, text, _ in demand], row=1))
    parts.append("</svg>")
    return "".join(parts)


def _frame(top: float, bottom: float, top_label: str, unit: str) -> str:
    return (
        f'<line class="axis" x1="{_LEFT}" y1="{bottom}" x2="{WIDTH - _RIGHT}" y2="{bottom}"/>'
        f'<line class="axis" x1="{_LEFT}" y1="{top}" x2="{_LEFT}" y2="{bottom}"/>'
        f'<line class="grid" x1="{_LEFT}" y1="{top}" x2="{WIDTH - _RIGHT}" y2="{top}"/>'
        f'<text class="label" x="{_LEFT - 4}" y="{top + 4}" text-anchor="end">'
        f"{escape(top_label)}</text>"
        f'<text class="label" x="{_LEFT - 4}" y="{bottom}" text-anchor="end">0</text>'
        f'<text class="label" x="{_LEFT - 4}" y="{(top + bottom) / 2}" text-anchor="end">'
        f"{escape(unit)}</text>"
    )


def _note(y: float, text: str) -> str:
    return (
        f'<text class="note" x="{(WIDTH + _LEFT) / 2}" y="{y}" text-anchor="middle">'
        f"{escape(text)}</text>"
    )


def _time_ticks(axis: _Axis) -> str:
    first = axis.start.replace(minute=0, second=0, microsecond=0) + _HOUR
    ticks = []
    at = first
    while at <= axis.end:
        if at.hour % 4 == 0:
            ticks.append(
                f'<text class="label" x="{axis.x(at):.1f}" y="{HEIGHT - 8}" '
                f'text-anchor="middle">{at:%H}:00</text>'
            )
        at += _HOUR
    return "".join(ticks)


_LEGEND = [("capacity", "capacity running"), ("expected", "expected"), ("target", "target")]


def _legend(items: Sequence[tuple[str, str]], row: int = 0) -> str:
    y = _TOP + 12 + 14 * row
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
