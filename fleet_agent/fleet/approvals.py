"""When a fleet change needs an operator's approval: pure rules, used at the tool.

`approval_mode` (AgentConfig) decides: `off` asks nothing, `threshold` asks
for a create above `approval_above_dph` or one that leaves the fleet's $/h
more than `approval_above_fleet_dph_increase` above what it was an hour
before, and for a destroy that takes expected capacity below
`min_fleet_fraction` of the target; `always` asks for every change. The
capacity floor holds in every mode: with approvals off, such a destroy is
refused, since nobody could approve it. A machine that is not capacity (dead,
stopped, not proving) may always go.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleet_agent.models import AgentConfig

__all__ = ["Gate", "create_gate", "destroy_gate"]


@dataclass(frozen=True)
class Gate:
    """What stands before a change: nothing, an approval to ask, or a refusal."""

    ask: str = ""  # the reason an approval is needed
    refuse: str = ""  # the reason the change is refused outright

    @property
    def open(self) -> bool:
        return not self.ask and not self.refuse


def create_gate(
    config: AgentConfig, *, offer_dph: float, fleet_dph: float, fleet_dph_hour_ago: float
) -> Gate:
    """Renting an offer at `offer_dph` onto a fleet that costs `fleet_dph` now
    and cost `fleet_dph_hour_ago` an hour ago."""
    if config.approval_mode == "off":
        return Gate()
    reasons = []
    # Written `not (x <= limit)`: a NaN asks (prices fail closed).
    if not offer_dph <= config.approval_above_dph:
        reasons.append(
            f"the offer costs ${offer_dph:.3f}/h, above approval_above_dph "
            f"${config.approval_above_dph:g}/h"
        )
    increase = fleet_dph + offer_dph - fleet_dph_hour_ago
    if not increase <= config.approval_above_fleet_dph_increase:
        reasons.append(
            f"the fleet would cost ${fleet_dph + offer_dph:.2f}/h, ${increase:.2f}/h more than "
            f"an hour ago (approval_above_fleet_dph_increase "
            f"${config.approval_above_fleet_dph_increase:g}/h)"
        )
    if config.approval_mode == "always":
        reasons.insert(0, "approval_mode is always")
    return Gate(ask="; ".join(reasons))


def destroy_gate(config: AgentConfig, *, machine_capacity: float, fleet_capacity: float) -> Gate:
    """Releasing a machine expected to prove `machine_capacity` proofs/h from
    a fleet expected to prove `fleet_capacity` (both 0 for a failed machine)."""
    floor = config.min_fleet_fraction * config.target_proofs_per_hour
    after = fleet_capacity - machine_capacity
    below = ""
    if machine_capacity > 0 and after < floor:
        below = (
            f"it would leave {after:.0f} proofs/h expected, below min_fleet_fraction "
            f"{config.min_fleet_fraction:g} × target {config.target_proofs_per_hour:g} "
            f"= {floor:.0f} proofs/h"
        )
    if config.approval_mode == "off":
        if below:
            return Gate(
                refuse=f"{below}, and approval_mode is off, so nobody can approve it; "
                "destroy a failed machine instead, or ask the operator"
            )
        return Gate()
    reasons = ["approval_mode is always"] if config.approval_mode == "always" else []
    if below:
        reasons.append(below)
    return Gate(ask="; ".join(reasons))
