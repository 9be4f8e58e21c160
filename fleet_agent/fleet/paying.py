"""What "lower the fleet" means when the fleet proves at a loss
(AgentConfig.market_on_loss = "lower"): the capacity of the machines that
pay for themselves at the revenue a proof brings, so the target drops to
what earns and the dear machines are the ones released.

A machine pays when its dollars per proof (its $/h over its expected
proofs/h, as the snapshot shows it) is under the revenue per paid proof.
Machines not yet measured count at the capacity model's estimate, as the
rest of the planning does. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

from fleet_agent.fleet.snapshot import FleetInstance

__all__ = ["paying_capacity", "revenue_per_proof_usd"]


def revenue_per_proof_usd(
    revenue_usd_per_h: float | None, paid_proofs_per_h: float
) -> float | None:
    """Dollars a paid proof brought over the last hour (None: unknown)."""
    if revenue_usd_per_h is None or paid_proofs_per_h <= 0:
        return None
    return revenue_usd_per_h / paid_proofs_per_h


def paying_capacity(instances: Iterable[FleetInstance], usd_per_proof: float) -> float:
    """Proofs per hour of the machines whose $ per proof is under `usd_per_proof`."""
    total = 0.0
    for inst in instances:
        rate = inst.expected_proofs_per_hour
        if rate > 0 and inst.dph / rate < usd_per_proof:
            total += rate
    return round(total, 3)
