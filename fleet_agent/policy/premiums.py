"""How much more ($/h) a plan may pay than the cheapest one, and how much a
trade must save (the rules: fleet_agent/autopilot/band.py, fast_cover.py,
trade.py)."""

from __future__ import annotations

__all__ = ["FAST_COVER_PREMIUM", "INSIDE_BAND_PREMIUM", "SPARE_PREMIUM", "TRADE_SAVING"]

#: How much dearer ($/h) a cover that ends inside the band may be than the
#: cheapest cover, which would end over it.
INSIDE_BAND_PREMIUM = 0.25
#: How much dearer ($/h) a set that holds the spare's level inside the band
#: may be than the one that holds the target there (`inside_band`). The
#: spare adds at most SPARE_MAX (3.5 %) of the target in capacity; paying
#: more than this for it, for hours, costs more than the failure it covers.
SPARE_PREMIUM = 0.05
#: The most a fast cover may add to the fleet's $/h (the machines kept and
#: the cover), a share of it.
FAST_COVER_PREMIUM = 0.02
#: How much cheaper per hour the new machine must be than the one it
#: replaces, a share of the old one's $/h. The new one is paid through its
#: 10-60 min load beside the old one, and a seventh of boots fail: at a
#: quarter the saving pays that back in about two hours.
TRADE_SAVING = 0.25
