"""When a large gap is bridged with fast temporary machines, and how many
(the rule: fleet_agent/autopilot/bridges.py)."""

from __future__ import annotations

__all__ = [
    "BRIDGE_FAST_MINUTES",
    "BRIDGE_MAX_MACHINES",
    "BRIDGE_MAX_SIZE",
    "BRIDGE_MIN_GAP",
    "BRIDGE_SHARE",
]

#: The smallest gap, as a share of the target, worth bridging: below it the
#: fleet is at most this far under while the cover loads.
BRIDGE_MIN_GAP = 0.10
#: An offer is fast when its row's `est_load_minutes` is at most this.
BRIDGE_FAST_MINUTES = 15.0
#: The bridges' share of the slow machines' rate: all of it, so the fleet is
#: at the target once the bridges prove (each goes as a slow machine arrives).
BRIDGE_SHARE = 1.0
#: A bridge is at most this share of the target: the policy releases one as
#: soon as the others prove the target without it, so the fleet is over the
#: target by less than one bridge meanwhile, inside the ±5 % band.
BRIDGE_MAX_SIZE = 0.05
#: At most this many bridges per gap (and what `bridge_room` leaves under the
#: hour's create limit): 12 × 25 proofs/h bridge an 800 target's increase.
BRIDGE_MAX_MACHINES = 12
