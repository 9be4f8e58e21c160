"""The offer search the guardrails imply, for vast.ai to apply on its side.

The market holds more than 10,000 offers, most of them GPUs and hosts we
would refuse; the cheapest few hundred of everything are nearly all
unwanted. So every guardrail and every need of the prover is a filter of the
search itself, and the guardrails are checked again on what comes back
(fleet_agent/fleet/guardrails.py): the service may ignore a filter it does
not know.

Allowed GPUs are families ("A100" allows "A100 SXM4" and "A100 PCIE"), but the
search matches ``gpu_name`` exactly (``{"in": [...]}``). They are expanded
against the market's own GPU catalogue (``GET /api/v0/gpu_names/unique/``,
which the vastai CLI reads too) into the exact names of every model in an
allowed family.

RAM per GPU has no field of its own, and ``cpu_ram`` is the whole host's (a
rental gets its ``gpu_frac`` share: `slice_ram_mb`, fleet_agent/vast/models.py),
so the search asks for a host with the RAM of a one-GPU machine and caps the
GPU count; the rental's share and the per-GPU rule are checked on what comes
back (fleet_agent/fleet/guardrails.py), as is the CUDA a GPU model needs
(``cuda_max_good`` is one filter for all GPUs: the image's minimum, raised
to the least any GPU searched for needs, `search_min_cuda`).

Machines and hosts that failed for this agent (fleet_agent/fleet/failed_hosts.py)
are left out with ``notin``: the vastai CLI's query parser (vast-cli ``vast.py``,
``parse_query``, commit 5567983) maps ``notin`` / ``not in`` / ``nin`` to
``{"notin": [...]}``, and its ``offers_fields`` lists ``machine_id`` and
``host_id``.

The price of downloads is a filter too: ``inet_down_cost`` ($/GB) at most
`max_inet_down_cost_per_tb` / 1,000 (the CLI's ``offers_fields`` lists it).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from fleet_agent.fleet.capacity import min_cuda
from fleet_agent.fleet.offer_cost import GB_PER_TB
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.models import AgentConfig

from .guardrails import gpu_allowed

__all__ = ["allowed_gpu_names", "offer_filters", "search_min_cuda"]


def allowed_gpu_names(
    allowed: Iterable[str], catalogue: Iterable[str], wanted: str | None = None
) -> list[str]:
    """The exact ``gpu_name`` values to search for.

    Every catalogue name in an allowed family; an allowed name that matches
    nothing in the catalogue is kept as written (a model the catalogue does
    not list yet is still found when it is named exactly). Narrowed to
    `wanted`'s family when given.
    """
    allowed = list(allowed)
    catalogue = list(catalogue)
    names = {n for n in catalogue if gpu_allowed(n, allowed)}
    names |= {a for a in allowed if not any(gpu_allowed(n, [a]) for n in catalogue)}
    if wanted:
        names = {n for n in names if gpu_allowed(n, [wanted])}
    return sorted(names)


def search_min_cuda(prover: ProverSpec, gpu_names: Iterable[str]) -> float:
    """The ``cuda_max_good`` floor of a search for `gpu_names`: the image's
    minimum, or the least that any of those GPUs needs when that is more
    (`min_cuda`; a GPU the model does not know needs nothing of its own), so
    no offer that could pass the per-offer check is left out."""
    needs = [min_cuda(name) for name in gpu_names]
    return max(prover.min_cuda, min(needs)) if needs else prover.min_cuda


def offer_filters(
    config: AgentConfig,
    prover: ProverSpec,
    gpu_names: list[str],
    *,
    max_dph: float | None = None,
    min_reliability: float | None = None,
    exclude_machines: Collection[int] = (),
    exclude_hosts: Collection[int] = (),
) -> dict[str, dict[str, Any]]:
    """The search's filters: the guardrails of `config`, tightened by the
    model's own `max_dph` / `min_reliability` (never loosened), what `prover`
    needs of a machine, and no offer of `exclude_machines` / `exclude_hosts`."""
    dph = min(max_dph or config.max_instance_dph, config.max_instance_dph)
    reliability = max(min_reliability or 0.0, config.min_reliability)
    filters: dict[str, dict[str, Any]] = {
        "rentable": {"eq": True},
        "rented": {"eq": False},
        "external": {"eq": False},
        "gpu_name": {"in": list(gpu_names)},
        "num_gpus": {"gte": 1, "lte": prover.max_gpus},
        "cpu_ram": {"gte": prover.min_host_ram_mb(1)},
        "reliability": {"gte": reliability},
        "dph_total": {"lte": dph},
        # $/GB, as rows give it; the cap is per TB (fleet_agent/fleet/offer_cost.py).
        "inet_down_cost": {"lte": config.max_inet_down_cost_per_tb / GB_PER_TB},
        "inet_down": {"gte": prover.min_inet_down_mbps},
        "cuda_max_good": {"gte": search_min_cuda(prover, gpu_names)},
        "disk_space": {"gte": prover.disk_gb},
        # Seconds, as rows give it (the CLI multiplies its days by 86,400).
        "duration": {"gte": prover.rental_hours * 3600},
    }
    if prover.verified_only:
        filters["verified"] = {"eq": True}
    if prover.public_port is not None:
        # Only hosts with direct ports can map the front's (or status) port.
        filters["direct_port_count"] = {"gte": 1}
    # Sorted, so the same memory makes the same query.
    if exclude_machines:
        filters["machine_id"] = {"notin": sorted(exclude_machines)}
    if exclude_hosts:
        filters["host_id"] = {"notin": sorted(exclude_hosts)}
    return filters
