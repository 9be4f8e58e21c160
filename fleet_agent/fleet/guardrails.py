"""Hard limits on what the agent may rent, enforced in code, never only in the prompt.

Pure functions: the fleet activities call them with the live fleet and the
agent's current config; a refusal is returned to the model as a clear error
and nothing is rented. The same limits are pushed into the offer search
(fleet_agent/fleet/offer_query.py); checking them again here keeps an offer
the service let through (a filter it ignored, a price that moved, an offer
looked up by id for a create) from being rented.

Prices fail closed: every comparison is written `not (price <= cap)`, so a
NaN is over any cap, and a machine whose price is missing or negative counts
at the per-instance cap. Creates in flight (`reserved`: journalled, no
result yet, machine not listed) count against every cap as if rented.

Downloads are priced per TB (`max_inet_down_cost_per_tb`): an offer over it
(or stating no usable price) is never rented, and a machine rented over it
(the host repriced between search and rental) is released at once. What
downloads add per hour (fleet_agent/fleet/offer_cost.py) counts in
`max_fleet_dph` (`fleet_cost_dph`) and in the daily budget's projection
(`beyond_ledger_dph`). A machine whose row does not parse
(`Instance.unreadable`, fleet_agent/vast/parse.py) still bills: it counts as
one instance, at `max_instance_dph` and at the download cap, in every cap.
"""

from __future__ import annotations

from collections.abc import Sequence

from fleet_agent.fleet.capacity import min_cuda
from fleet_agent.fleet.offer_cost import (
    machine_transfer_dph,
    offer_transfer_dph,
    per_tb,
)
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.models import AgentConfig
from fleet_agent.untrusted import fence
from fleet_agent.vast.models import Instance, Offer

__all__ = [
    "above_approved",
    "beyond_ledger_dph",
    "fleet_cost_dph",
    "fleet_dph",
    "gpu_allowed",
    "machine_refusal",
    "offer_cost_dph",
    "offer_refusal",
    "rent_refusal",
    "rented_refusal",
]

_UNVERIFIED = frozenset({"unverified", "deverified"})
#: A rented machine's price may round differently from the offer an
#: operator approved: 1 % over it is the same price, more is a rise.
_APPROVED_SLACK = 1.01


def gpu_allowed(gpu_name: str, allowed: list[str]) -> bool:
    """'A100' allows 'A100 SXM4' and 'A100 PCIE' (not 'A100X'); matching ignores case."""
    name = gpu_name.casefold()
    return any(name == a.casefold() or name.startswith(a.casefold() + " ") for a in allowed)


def offer_refusal(
    offer: Offer, config: AgentConfig, prover: ProverSpec | None = None
) -> str | None:
    """Why this offer may never be rented under `config` (and by `prover`), or None."""
    if not gpu_allowed(offer.gpu_name, config.allowed_gpus):
        gpu = fence(offer.gpu_name, 60)
        return f"GPU {gpu} is not allowed (allowed: {', '.join(config.allowed_gpus)})"
    if not offer.dph_total <= config.max_instance_dph:
        return (
            f"offer costs ${offer.dph_total:.3f}/h, over the ${config.max_instance_dph:g}/h "
            "per-instance cap"
        )
    transfer = _transfer_refusal(offer.inet_down_cost, config)
    if transfer is not None:
        return transfer
    reliability = offer.reliability2 if offer.reliability2 is not None else offer.reliability
    if reliability is None or reliability < config.min_reliability:
        return f"reliability {reliability} is under the minimum {config.min_reliability:g}"
    if offer.rentable is False:
        return "the offer is not rentable"
    if offer.rented is True or offer.external is True:
        return "the offer is not open to rent (rented or external)"
    if prover is not None:
        return machine_refusal(offer, prover)
    return None


def machine_refusal(offer: Offer, prover: ProverSpec) -> str | None:
    """Why the machine of `offer` cannot run `prover`, or None. A field the
    offer does not carry is not held against it (the search filtered on it).
    RAM is the rental's share of the host's (`Offer.ram_mb`), at least
    cuzk's 128 GiB for its one daemon (`ProverSpec.min_host_ram_mb`); CUDA must be
    new enough for the image and for the GPU (`min_cuda`); the host's
    longest contract must cover `ProverSpec.rental_hours`."""
    if prover.verified_only and (
        offer.verified is False or (offer.verification or "").lower() in _UNVERIFIED
    ):
        return "the host is not verified"
    if offer.num_gpus > prover.max_gpus:
        return f"{offer.num_gpus} GPUs, over the {prover.max_gpus} a prover uses"
    need = prover.min_host_ram_mb(offer.num_gpus)
    if offer.ram_mb < need:
        share = (
            f" ({offer.gpu_frac:.0%} of the host's {offer.cpu_ram / 1024:.0f} GiB)"
            if offer.ram_mb < offer.cpu_ram
            else ""
        )
        return (
            f"RAM {offer.ram_mb / 1024:.0f} GiB{share} is under the {need / 1024:.0f} GiB "
            f"a machine of {offer.num_gpus} GPU(s) needs for cuzk"
        )
    if offer.disk_space is not None and offer.disk_space < prover.disk_gb:
        return f"{offer.disk_space:g} GB of disk, under the {prover.disk_gb:g} GB rented"
    if offer.inet_down is not None and offer.inet_down < prover.min_inet_down_mbps:
        return (
            f"download {offer.inet_down:g} Mb/s is under {prover.min_inet_down_mbps:g} Mb/s "
            "(proof parameters take too long to fetch)"
        )
    if offer.cuda_max_good is not None and offer.cuda_max_good < prover.min_cuda:
        return f"CUDA {offer.cuda_max_good:g} is older than the {prover.min_cuda:g} the image needs"
    gpu_cuda = min_cuda(offer.gpu_name, offer.compute_cap)
    if offer.cuda_max_good is not None and offer.cuda_max_good < gpu_cuda:
        return (
            f"CUDA {offer.cuda_max_good:g} is older than the {gpu_cuda:g} a "
            f"{fence(offer.gpu_name, 60)} needs"
        )
    if offer.duration is not None and offer.duration < prover.rental_hours * 3600:
        return (
            f"the host's longest contract is {offer.duration / 3600:.1f} h, under the "
            f"{prover.rental_hours:g} h a rental is planned for"
        )
    if prover.public_port is not None and offer.direct_port_count == 0:
        what = "router's front" if prover.mode == "router" else "prover's status"
        return f"the host has no direct ports for the {what} port"
    return None


def _transfer_refusal(inet_down_cost: float | None, config: AgentConfig) -> str | None:
    """Why downloads at `inet_down_cost` ($/GB, as a row states it) may not
    be rented under `config`, or None; no usable price is refused."""
    cap = config.max_inet_down_cost_per_tb
    if inet_down_cost is None:
        return "the host states no usable download price (inet_down_cost)"
    if not per_tb(inet_down_cost) <= cap:
        return (
            f"downloads cost ${per_tb(inet_down_cost):.2f}/TB, over the ${cap:g}/TB cap "
            "(max_inet_down_cost_per_tb; a prover downloads ~50 GB at boot)"
        )
    return None


def fleet_dph(fleet: Sequence[Instance], *, unpriced: float) -> float:
    """What `fleet` bills per hour (dead, stopped and frozen machines
    included); a machine whose row states no usable price (an unreadable
    one among them) counts `unpriced`."""
    return sum(unpriced if i.price is None else i.price for i in fleet if not i.is_gone)


def offer_cost_dph(offer: Offer, prover: ProverSpec | None = None) -> float:
    """What renting `offer` adds per hour as the caps count it: its
    ``dph_total`` and what its downloads add."""
    return offer.dph_total + offer_transfer_dph(offer, prover or ProverSpec())


def fleet_cost_dph(
    fleet: Sequence[Instance], config: AgentConfig, prover: ProverSpec | None = None
) -> float:
    """What `fleet` costs per hour as `max_fleet_dph` counts it: each
    machine's ``dph_total`` (`max_instance_dph` without a usable one) and
    what its downloads add (at the download cap without a usable price)."""
    members = [i for i in fleet if not i.is_gone]
    spec = prover or ProverSpec()
    transfer = sum(machine_transfer_dph(i, config.max_inet_down_cost_per_tb, spec) for i in members)
    return fleet_dph(members, unpriced=config.max_instance_dph) + transfer


def beyond_ledger_dph(
    fleet: Sequence[Instance], config: AgentConfig, prover: ProverSpec | None = None
) -> float:
    """What the daily budget's projection adds to the spend ledger's $/h
    for `fleet` (fleet_agent/store/spend.py): every machine's downloads
    (the ledger bills traffic only once it is counted), and each machine
    whose row does not parse at `max_instance_dph` (in place of the rate
    the ledger goes on billing it at: activities/fleet_spend.py). It
    overcounts a machine that fetched its parameters already, as a budget
    would rather."""
    members = [i for i in fleet if not i.is_gone]
    spec = prover or ProverSpec()
    unreadable = sum(config.max_instance_dph for i in members if i.unreadable is not None)
    transfer = sum(machine_transfer_dph(i, config.max_inet_down_cost_per_tb, spec) for i in members)
    return unreadable + transfer


def rent_refusal(
    offer: Offer,
    fleet: Sequence[Instance],
    config: AgentConfig,
    prover: ProverSpec | None = None,
    *,
    reserved: Sequence[float] = (),
) -> str | None:
    """Why renting `offer` now, next to this agent's `fleet` and the creates
    in flight (`reserved`, their $/h), is refused, or None.

    `fleet` holds no destroyed rows (`VastClient.list_instances` leaves them
    out); dead, stopped and frozen machines count, as vast.ai still bills them.
    """
    reason = offer_refusal(offer, config, prover)
    if reason is not None:
        return reason
    flying = f", {len(reserved)} more being rented" if reserved else ""
    if not len(fleet) + len(reserved) + 1 <= config.max_instances:
        return f"the fleet already has {len(fleet)} instances{flying} (cap {config.max_instances})"
    spend = fleet_cost_dph(fleet, config, prover) + sum(reserved)
    cost = offer_cost_dph(offer, prover)
    if not spend + cost <= config.max_fleet_dph:
        return (
            f"fleet spend would be ${spend + cost:.2f}/h with downloads{flying}, "
            f"over the ${config.max_fleet_dph:g}/h cap"
        )
    return None


def above_approved(dph: float, approved_dph: float) -> bool:
    """Whether `dph` is a higher price than the `approved_dph` an operator
    approved (rounding aside); a NaN is."""
    return not dph <= approved_dph * _APPROVED_SLACK


def rented_refusal(
    rented: Instance,
    fleet: Sequence[Instance],
    config: AgentConfig,
    approved_dph: float | None = None,
    prover: ProverSpec | None = None,
) -> str | None:
    """Why the machine just rented may not stay, by the prices vast.ai bills
    it at (`dph_total` and ``inet_down_cost`` of its row, which may differ
    from the offer's), or None. `fleet`: the agent's machines as listed now,
    `rented` among them; `approved_dph`: the $/h an operator approved for
    this call. A row without a usable download price is kept, counted at
    the download cap."""
    if rented.unreadable is not None:
        return f"its vast.ai row does not parse ({fence(rented.unreadable, 120)})"
    dph = rented.price
    if dph is None:
        return "vast.ai states no usable price for it"
    if not dph <= config.max_instance_dph:
        return (
            f"it is billed ${dph:.3f}/h, over the ${config.max_instance_dph:g}/h per-instance cap"
        )
    if approved_dph is not None and above_approved(dph, approved_dph):
        return f"it is billed ${dph:.3f}/h, above the ${approved_dph:.3f}/h an operator approved"
    down = rented.inet_down_cost
    if down is not None and not per_tb(down) <= config.max_inet_down_cost_per_tb:
        return (
            f"its downloads are billed ${per_tb(down):.2f}/TB, over the "
            f"${config.max_inet_down_cost_per_tb:g}/TB cap (max_inet_down_cost_per_tb)"
        )
    others = [i for i in fleet if i.id != rented.id]
    total = fleet_cost_dph(others, config, prover) + fleet_cost_dph([rented], config, prover)
    if not total <= config.max_fleet_dph:
        return (
            f"the fleet costs ${total:.2f}/h with it and its downloads, over the "
            f"${config.max_fleet_dph:g}/h cap"
        )
    return None
