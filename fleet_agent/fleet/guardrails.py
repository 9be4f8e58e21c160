"""Hard limits on what the agent may rent, enforced in code, never only in the prompt.

Pure functions: the fleet activities call them with the live fleet and the
agent's current config; a refusal is returned to the model as a clear error
and nothing is rented.
"""

from __future__ import annotations

from fleet_agent.models import AgentConfig
from fleet_agent.vast.models import Instance, Offer

__all__ = ["gpu_allowed", "offer_refusal", "rent_refusal"]


def gpu_allowed(gpu_name: str, allowed: list[str]) -> bool:
    """'A100' allows 'A100 SXM4' and 'A100 PCIE'; matching ignores case."""
    name = gpu_name.casefold()
    return any(name == a.casefold() or name.startswith(a.casefold() + " ") for a in allowed)


def offer_refusal(offer: Offer, config: AgentConfig) -> str | None:
    """Why this offer may never be rented under `config`, or None."""
    if not gpu_allowed(offer.gpu_name, config.allowed_gpus):
        return f"GPU {offer.gpu_name!r} is not allowed (allowed: {', '.join(config.allowed_gpus)})"
    if offer.dph_total > config.max_instance_dph:
        return (
            f"offer costs ${offer.dph_total:.3f}/h, over the ${config.max_instance_dph:g}/h "
            "per-instance cap"
        )
    reliability = offer.reliability2 if offer.reliability2 is not None else offer.reliability
    if reliability is None or reliability < config.min_reliability:
        return f"reliability {reliability} is under the minimum {config.min_reliability:g}"
    if offer.rentable is False:
        return "the offer is not rentable"
    return None


def rent_refusal(offer: Offer, fleet: list[Instance], config: AgentConfig) -> str | None:
    """Why renting `offer` now, next to this agent's `fleet`, is refused, or None."""
    reason = offer_refusal(offer, config)
    if reason is not None:
        return reason
    if len(fleet) + 1 > config.max_instances:
        return f"the fleet already has {len(fleet)} instances (cap {config.max_instances})"
    spend = sum(i.dph_total or 0.0 for i in fleet)
    if spend + offer.dph_total > config.max_fleet_dph:
        return (
            f"fleet spend would be ${spend + offer.dph_total:.2f}/h, over the "
            f"${config.max_fleet_dph:g}/h cap"
        )
    return None
