"""How long a rented machine takes before it proves: an estimate from its link.

After boot, a prover downloads its ~47 GiB of proof parameters
(fleet_agent/capacity.py); on vast.ai's market the host's download speed
(`inet_down`, Mb/s) spreads over two orders of magnitude, so it decides
whether a new machine proves 10 minutes after the rental or an hour. The
model sees the estimate in every offer row (`est_load_minutes`, with
`inet_down_mbps`). The autopilot does not weigh it: measured, a weighed
cover moved the market day's time in band less than two runs of one seed
differ, and raised its $/h (docs/DECISIONS.md, "Load time").
"""

from __future__ import annotations

__all__ = ["BOOT_MINUTES", "PARAMS_GB", "est_load_minutes"]

#: The parameters a prover downloads once per machine, GB (47 GiB).
PARAMS_GB = 47 * 1.073741824
#: Provisioning, the image pull and loading the parameters into RAM, minutes:
#: a flat allowance, since the image's size and the host's disk vary less.
BOOT_MINUTES = 4.0


def est_load_minutes(inet_down_mbps: float | None) -> float | None:
    """Minutes from the rental to the first proof at the host's listed
    download speed; None when the offer does not say. Real downloads rarely
    fill the link, so this is a lower bound used to rank offers."""
    if not inet_down_mbps or inet_down_mbps <= 0:
        return None
    return BOOT_MINUTES + PARAMS_GB * 8_000 / inet_down_mbps / 60
