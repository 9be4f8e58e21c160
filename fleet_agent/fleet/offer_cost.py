"""What an offer or a machine costs per hour once it proves, beyond its rental price.

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
(fleet_agent/fleet/guardrails.py) bound the price per TB
(`max_inet_down_cost_per_tb`, `per_tb`) and count `offer_transfer_dph` and
`machine_transfer_dph` in `max_fleet_dph` and the daily budget's projection.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet_agent.fleet.capacity import proofs_per_hour
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.vast.models import Instance, Offer

from .load_time import PARAMS_GB

__all__ = [
    "GB_PER_TB",
    "machine_transfer_dph",
    "offer_dph",
    "offer_transfer_dph",
    "per_tb",
    "transfer_dph",
]

#: ``inet_down_cost`` is $ per GB; the cap is $ per TB, as vast.ai's console
#: shows bandwidth prices (a TB of the field's own GB).
GB_PER_TB = 1000.0


def per_tb(inet_down_cost: float) -> float:
    """A row's ``inet_down_cost`` ($/GB) as $/TB."""
    return inet_down_cost * GB_PER_TB


def transfer_dph(inet_down_cost: float | None, proofs_per_hour: float, prover: ProverSpec) -> float:
    """$/h of downloads for a machine at `proofs_per_hour` on a host that
    charges `inet_down_cost` $/GB (absent: the host charges nothing)."""
    if not inet_down_cost or inet_down_cost <= 0:
        return 0.0
    params = (PARAMS_GB + prover.image_gb) / prover.rental_hours
    inputs = max(0.0, proofs_per_hour) * prover.proof_input_mb / 1000.0
    return inet_down_cost * (params + inputs)


def offer_transfer_dph(offer: Offer, prover: ProverSpec) -> float:
    """`transfer_dph` of an offer at the capacity model's rate for it."""
    rate = proofs_per_hour(offer.gpu_name, offer.num_gpus, offer.ram_mb, offer.cpu_cores_effective)
    return transfer_dph(offer.inet_down_cost, rate, prover)


def machine_transfer_dph(inst: Instance, cap_per_tb: float, prover: ProverSpec) -> float:
    """`transfer_dph` of a rented machine at the price its row states; a row
    that states no usable one (absent, negative, not a number: cleaned to
    None, fleet_agent/vast/models.py), or does not parse at all, counts at
    the cap (`cap_per_tb`, $/TB): a price is never read as $0."""
    price = inst.inet_down_cost if inst.unreadable is None else None
    if price is None:
        price = cap_per_tb / GB_PER_TB
    rate = proofs_per_hour(
        inst.gpu_name or "", inst.num_gpus or 1, inst.ram_mb, inst.cpu_cores_effective
    )
    return transfer_dph(price, rate, prover)


def offer_dph(row: Mapping[str, Any]) -> float:
    """What an offer row (search_offers) costs per hour once it proves: its
    rental ``dph`` plus its ``transfer_dph``."""
    return float(row.get("dph") or 0.0) + float(row.get("transfer_dph") or 0.0)
