"""An open gap: one the search finds no offer for, looked at again on a check
instead of on every run.

`choose_offers` (policy.py) leaves a gap open when every cover would take
the fleet past the band and the fleet is at most SMALL_GAP under the
target without it: the fleet is inside the band, only the spare's level
is short. Searched again on every run of such a fleet, it finds nothing
again, and each search costs a second model call (a tool round trip) on
almost half the runs of a market day (the cases: bench/results/
2026-12-07-autopilot-rule-cases.md, "Open gap"). So a search that finds
nothing for such a gap is followed by a check (`schedule_next_check`,
GAP_CHECK_SECONDS ahead) whose reason carries the gap, and no run
searches for a gap while a check pending covers it: one scheduled for a
gap at least as large, less GAP_GROWTH_SHARE of the target. A failure or
a higher target opens a larger gap, which is searched at once. Pure
functions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from fleet_agent.policy.band import SMALL_GAP
from fleet_agent.policy.checks import GAP_CHECK_PREFIX, GAP_GROWTH_SHARE

__all__ = ["gap_check_reason", "gap_checked", "leaves_gap_open"]


_REASON = re.compile(rf"^{re.escape(GAP_CHECK_PREFIX)}: (?P<gap>[\d.]+) proofs/h open\b")


def gap_check_reason(gap: float) -> str:
    """The reason of the check scheduled after a search found nothing for `gap`."""
    return f"{GAP_CHECK_PREFIX}: {gap:.1f} proofs/h open"


def leaves_gap_open(expected: float, target: float) -> bool:
    """Whether a gap the search found nothing for waits for a check: the
    fleet's expected capacity without it is at most SMALL_GAP under the
    target (inside the band, as `choose_offers` leaves such a gap open). A
    larger gap, which no offer shown could cover, is searched on every run."""
    return target > 0 and expected >= (1 - SMALL_GAP) * target - 1e-6


def gap_checked(pending: Iterable[str], gap: float, target: float) -> bool:
    """Whether a pending check (its reason, as the run's pending wakes show
    it) covers `gap`: one scheduled for a gap no more than GAP_GROWTH_SHARE
    of the target smaller."""
    for reason in pending:
        found = _REASON.match(reason)
        if found is not None and gap <= float(found.group("gap")) + GAP_GROWTH_SHARE * target:
            return True
    return False
