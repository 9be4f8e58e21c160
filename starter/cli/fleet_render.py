"""`fleet-agent fleet` as text: one row per machine, then the totals, and in
market mode the business's line (starter/views/market_render.py).

The view itself is built in starter/views/fleet.py (shared with the console).
"""

from __future__ import annotations

from datetime import datetime

from fleet_agent.fleet.snapshot import UNREADABLE_COUNTED
from fleet_agent.market.point import MarketPoint
from starter.hints import CLI
from starter.views.fleet import Flag, FleetRow, FleetView
from starter.views.market_render import market_summary
from starter.views.render import fmt_duration, fmt_when, table

__all__ = ["fleet_text"]

_HEADERS = ("ID", "GPU", "STATE", "MEASURED", "EXPECTED", "$/H", "AGE", "HOST", "FLAGS")


def _cells(row: FleetRow) -> list[str]:
    gpu = row.gpu if row.num_gpus == 1 else f"{row.num_gpus}× {row.gpu}"
    measured = "—" if row.measured_proofs_per_hour is None else f"{row.measured_proofs_per_hour:g}"
    host = f"m{row.machine_id or '?'}/h{row.host_id or '?'}"
    age = "—" if row.age_minutes is None else fmt_duration(row.age_minutes * 60)
    return [
        str(row.id),
        gpu,
        row.state,
        measured,
        f"{row.expected_proofs_per_hour:g}",
        "?" if Flag.UNREADABLE in row.flags else f"{row.dph:.3f}",
        age,
        host,
        ", ".join(row.flags),
    ]


def _totals(view: FleetView) -> list[str]:
    target = view.target_proofs_per_hour
    share = f" ({100 * view.capacity_proofs_per_hour / target:.0f} %)" if target else ""
    lines = [
        f"capacity {view.capacity_proofs_per_hour:g} proofs/h{share} of target {target:g} "
        f"(gap {view.gap_proofs_per_hour:+g}); {view.expected_proofs_per_hour:g} once "
        f"loading ones are up; measured {view.measured_proofs_per_hour:g}",
    ]
    if view.holding is not None:
        lines[0] += f"; holding {view.holding:g} (a spare for one failure)"
    money = f"fleet ${view.fleet_dph:.3f}/h at the poll"
    if view.spend is not None:
        s = view.spend
        money += (
            f" · ledger ${s.current_dph:.3f}/h now · spend today ${s.today_usd:.2f}, "
            f"24 h ${s.last_24h_usd:.2f}, month ${s.month_usd:.2f}"
        )
    lines.append(money)
    return lines


def fleet_text(
    view: FleetView,
    now: datetime,
    *,
    market_mode: bool = False,
    market: MarketPoint | None = None,
) -> str:
    """The fleet table and its totals, headed by the snapshot's time; in
    market mode (`market_mode`) a last line of the business from `market`
    (the store's latest point; None: no reading yet)."""
    text = _fleet_lines(view, now)
    return f"{text}\n{market_summary(market, now)}" if market_mode else text


def _fleet_lines(view: FleetView, now: datetime) -> str:
    if view.as_of is None:
        lines = [
            f"agent {view.agent_id!r}: no fleet snapshot yet — its monitor has not polled "
            "(is the worker running, and the monitor enabled? "
            f"`{CLI} status --agent {view.agent_id}`)"
        ]
        if view.spend is not None and view.spend.today_usd:
            lines.append(f"spend today ${view.spend.today_usd:.2f}")
        return "\n".join(lines)
    head = f"fleet of agent {view.agent_id!r} as of {fmt_when(view.as_of, now)}"
    if view.stale:
        head += " — STALE: the monitor has not polled since; is the worker running?"
    lines = [head]
    if view.error:
        lines.append(f"the monitor's last poll could not list the fleet: {view.error}")
    if view.rows:
        lines.append(table(_HEADERS, [_cells(r) for r in view.rows]))
    elif not view.error:
        lines.append("no machines")
    unreadable = [r for r in view.rows if Flag.UNREADABLE in r.flags]
    if unreadable:
        ids = ", ".join(str(r.id) for r in unreadable)
        lines.append(
            f"{len(unreadable)} machine(s) whose vast.ai rows do not parse ({ids}): still "
            f"billed, each counted at {UNREADABLE_COUNTED}; its note says why"
        )
    lines += _totals(view)
    return "\n".join(lines)
