"""The checks the policy schedules (`schedule_next_check`) instead of
searching on every run, and the reasons they carry: a search that found
nothing is followed by one, and no run searches again while it is pending
(the rules: fleet_agent/autopilot/open_gap.py, swap.py, trade.py,
bridges.py)."""

from __future__ import annotations

__all__ = [
    "BRIDGE_CHECK_SECONDS",
    "GAP_CHECK_PREFIX",
    "GAP_CHECK_SECONDS",
    "GAP_GROWTH_SHARE",
    "SWAP_CHECK_REASON",
    "SWAP_CHECK_SECONDS",
    "TRADE_CHECK_REASON",
    "TRADE_CHECK_SECONDS",
]

#: How long an open gap waits for its next search. The market changes by
#: the minute, but the fleet is inside the band meanwhile: what waits is
#: the spare's last few proofs/h.
GAP_CHECK_SECONDS = 900
#: The check's reason starts so; the gap follows (`gap_check_reason`).
GAP_CHECK_PREFIX = "look again for a cover"
#: How much larger than a check's gap (a share of the target) a gap must be
#: to be searched before the check: a measurement moves the gap by a proof
#: or two, the smallest failure by 20.
GAP_GROWTH_SHARE = 0.01

#: How long a fleet past the band with no swap found waits for its next
#: search. Shorter than an open gap's (15 min) or a trade's (30 min): the
#: fleet is out of the band meanwhile.
SWAP_CHECK_SECONDS = 600
#: That check's reason, as the run's pending wakes show it.
SWAP_CHECK_REASON = "look again for a swap"

#: How often a settled fleet looks for a trade: one search, then a check
#: scheduled this far ahead, and no search while that check is pending. A
#: search on every run of a settled fleet was a second model call on each
#: (a tool round trip), 12 an hour, for a trade found a few times a day.
TRADE_CHECK_SECONDS = 1800
#: That check's reason, as the run's pending wakes show it.
TRADE_CHECK_REASON = "look for a trade"

#: The soonest the agent's check for when the oldest young bridge may go is
#: scheduled (the cover's arrivals wake runs of their own: a state change to
#: "proving").
BRIDGE_CHECK_SECONDS = 120
