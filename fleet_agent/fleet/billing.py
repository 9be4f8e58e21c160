"""How vast.ai bills an instance, as the spend ledger reads it from its row.

vast.ai's billing help: the active rental (GPU) cost is charged every second
an instance is active, storage every second it exists, bandwidth per GB. From
a row: `dph_total` (GPU plus the rented disk; a bid instance's bid plus disk)
in every state but stopped, `storage_total_cost` while stopped, nothing once
destroyed; and traffic from the cumulative counters `inet_down_billed` /
`inet_up_billed` at `inet_down_cost` / `inet_up_cost` per GB. The counters'
unit is undocumented: we read them as KB of 1,024 bytes and a billed GB as
1,024³ bytes (the vastai CLI divides them by 1,024 to show MB; one public
measurement found KB). The simulator bills by the same rules
(simulator/billing.py).

Nothing here is ever negative: a row's negative cost reads as absent
(fleet_agent/vast/models.py) and every figure is floored at 0 again here,
so no row can credit the ledger.
"""

from __future__ import annotations

import math

from fleet_agent.vast.models import Instance

__all__ = ["KB_PER_GB", "billed_dph", "hour_slices", "traffic_usd"]

KB_PER_GB = 1024.0 * 1024.0
_HOUR = 3600.0


def billed_dph(inst: Instance) -> float:
    """$/hour the instance is billed now, never negative. A stopped row
    without a storage price counts at `dph_total`: a budget would rather
    overcount. A row without a usable price is 0 here: the ledger keeps a
    machine's last rate instead (fleet_agent/store/spend.py)."""
    if inst.is_gone:
        return 0.0
    dph = inst.price or 0.0
    if inst.state == "stopped" and inst.storage_total_cost is not None:
        return max(0.0, float(inst.storage_total_cost))
    return dph


def traffic_usd(inst: Instance, down_kb: float, up_kb: float) -> float:
    """What `down_kb` and `up_kb` of traffic cost at the row's per-GB prices
    (a negative count or price adds nothing)."""
    down = max(0.0, down_kb) * max(0.0, float(inst.inet_down_cost or 0.0))
    up = max(0.0, up_kb) * max(0.0, float(inst.inet_up_cost or 0.0))
    return (down + up) / KB_PER_GB


def hour_slices(start: float, end: float) -> list[tuple[float, float]]:
    """(UTC hour start, seconds) of the interval [start, end) in epoch seconds,
    one slice per clock hour it touches; empty when `end <= start`."""
    slices: list[tuple[float, float]] = []
    at = start
    while at < end:
        hour = math.floor(at / _HOUR) * _HOUR
        upto = min(end, hour + _HOUR)
        slices.append((hour, upto - at))
        at = upto
    return slices
