"""How close to the band's edges a plan goes: the tolerance under the
target, the margin under the top, and how far an unmeasured machine is
trusted (the rules: fleet_agent/autopilot/band.py and policy.py)."""

from __future__ import annotations

__all__ = ["SMALL_GAP", "TOP_MARGIN", "UNMEASURED_SHARE"]

#: The one tolerance under the target both rules share (a share of it). A
#: gap this small is left open rather than covered past the band, and a
#: fleet past the band that no release brings into [target, band top] may be
#: released down to this far under the target: the fleet is inside the band
#: either way. One value for both, or a release would open a gap the rental
#: covers past the band again (a rent-and-release cycle). 3 %: the smallest
#: step a market day's fleets could come back into the band by (bench/
#: results/2026-12-07-autopilot-rule-cases.md, "Small gap").
SMALL_GAP = 0.03
#: Plans end this far (a share of the target) under the band's top, not at
#: it. A machine's figure is an estimate until measured and a measurement
#: after that (finished proofs over a window: a 25-proof machine's is a few
#: per cent either way), so a fleet planned to the top's last proof is over
#: it in truth half the time, and stays there for hours: the rules see it
#: inside ("Top margin" in bench/results/2026-12-07-autopilot-rule-cases.md).
#: The band's lower side has the spare.
TOP_MARGIN = 0.01
#: A release is judged with each machine not yet measured at this share of
#: its estimate: the capacity model can be a few per cent high on a host, and
#: a release on a belief the first measurement then takes back costs a
#: rental and its 10-60 min load, short of target meanwhile.
UNMEASURED_SHARE = 0.9
