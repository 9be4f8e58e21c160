"""How long a rented machine takes before it proves: an estimate from its link.

After boot, a prover downloads its ~47 GiB of proof parameters
(fleet_agent/fleet/capacity.py); on vast.ai's market the host's download speed
(`inet_down`, Mb/s) spreads over two orders of magnitude, so it decides
whether a new machine proves 10 minutes after the rental or an hour. The
model sees the estimate in every offer row (`est_load_minutes`, with
`inet_down_mbps`). The autopilot does not weigh it: measured, a weighed
cover moved the market day's time in band less than two runs of one seed
differ, and raised its $/h (docs/decisions/load-time.md, "Load time").
"""

from __future__ import annotations

__all__ = [
    "BOOT_MINUTES",
    "DEFAULT_IMAGE_GB",
    "PARAMS_GB",
    "STUCK_LOADING_MAX_MINUTES",
    "STUCK_LOADING_MIN_MINUTES",
    "est_load_minutes",
    "stuck_loading_minutes",
]

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


#: The prover image's size as pulled, GB, unless FLEET_PROVER_IMAGE_GB says.
DEFAULT_IMAGE_GB = 8.0
#: A machine still loading (provisioning, pulling the image) after this long
#: is stuck whatever its link: vast.ai hosts sometimes never finish the pull.
STUCK_LOADING_MAX_MINUTES = 30.0
#: ... and never judged stuck sooner than this, however fast its link.
STUCK_LOADING_MIN_MINUTES = 12.0
#: Provisioning and starting the container, minutes, on top of the pull.
_PROVISION_MINUTES = 6.0


def stuck_loading_minutes(inet_down_mbps: float | None, image_gb: float) -> float:
    """How long a rented machine may stay loading before it counts as stuck:
    6 minutes plus twice the image's pull at the host's listed download speed,
    between 12 and 30 minutes (30 when the speed is unknown).

    A flat 30 minutes let a hung boot on a 1 Gb/s host hold a place in the
    fleet for half an hour, then its replacement loaded for another 10-60
    (the market day's first hour: two hung boots left the fleet 8 % short
    for 38 minutes). Twice the pull at the listed speed leaves a real pull
    that gets half the link its time; the floor covers a slow registry.
    """
    if not inet_down_mbps or inet_down_mbps <= 0:
        return STUCK_LOADING_MAX_MINUTES
    pull = image_gb * 8_000 / inet_down_mbps / 60
    limit = max(STUCK_LOADING_MIN_MINUTES, _PROVISION_MINUTES + 2 * pull)
    return min(STUCK_LOADING_MAX_MINUTES, limit)
