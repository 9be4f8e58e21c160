"""What an offer costs per hour once it proves, beyond its rental price.

vast.ai bills traffic on top of ``dph_total``: ``inet_down_cost`` $/GB for
what the machine downloads (vast-cli ``vastai/cli/commands/offers.py``, the
field list of ``search offers``; fleet_agent/fleet/billing.py reads what was
billed). A prover downloads the proof parameters once per rental
(`PARAMS_GB`, fleet_agent/fleet/load_time.py) and every proof's inputs
(`ProverSpec.proof_input_mb`). Ranked by $/h alone, a host that charges for
traffic looks cheaper than it is: 47 GiB at $0.01/GB is $0.50 a rental.

`transfer_dph` spreads the parameters over the planned rental
(`ProverSpec.rental_hours`) and adds the inputs at the machine's rate; the
offer rows (activities/fleet_results.py) carry it, and the search and the
autopilot rank by `offer_dph` (rental plus transfer) per proof. The caps
(fleet_agent/fleet/guardrails.py) judge ``dph_total``, what vast.ai bills per
hour, as the operator sets them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet_agent.fleet.prover import ProverSpec

from .load_time import PARAMS_GB

__all__ = ["offer_dph", "transfer_dph"]


def transfer_dph(inet_down_cost: float | None, proofs_per_hour: float, prover: ProverSpec) -> float:
    """$/h of downloads for a machine at `proofs_per_hour` on a host that
    charges `inet_down_cost` $/GB (absent: the host charges nothing)."""
    if not inet_down_cost or inet_down_cost <= 0:
        return 0.0
    params = (PARAMS_GB + prover.image_gb) / prover.rental_hours
    inputs = max(0.0, proofs_per_hour) * prover.proof_input_mb / 1000.0
    return inet_down_cost * (params + inputs)


def offer_dph(row: Mapping[str, Any]) -> float:
    """What an offer row (search_offers) costs per hour once it proves: its
    rental ``dph`` plus its ``transfer_dph``."""
    return float(row.get("dph") or 0.0) + float(row.get("transfer_dph") or 0.0)
