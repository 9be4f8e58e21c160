"""Fault injection: what can go wrong, how often, and named scenarios.

Each fault has two switches. A ``*_next`` counter makes the next N matching
events misbehave for certain, which is what tests want. A ``*_rate`` makes each
event misbehave with that probability, drawn from the simulator's seeded RNG,
which is what a demo scenario wants. Counters are spent before rates are rolled.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

__all__ = ["SCENARIOS", "Faults", "scenario"]


@dataclass(slots=True)
class Faults:
    """The fault switches of one simulator; change them any time."""

    #: Offer rented by someone else between search and rent: 404 ``no_such_ask``.
    offer_taken_next: int = 0
    offer_taken_rate: float = 0.0
    #: Create rents the machine, then answers 5xx (`create_error_status`, plain text).
    create_error_next: int = 0
    create_error_rate: float = 0.0
    create_error_status: int = 500
    #: Create rents the machine, then answers only after `hang_seconds` real seconds.
    create_hang_next: int = 0
    create_hang_rate: float = 0.0
    hang_seconds: float = 60.0
    #: Create waits `create_delay_seconds` real seconds *before* it rents; it goes
    #: on (and rents) even if the client has given up meanwhile.
    create_delay_next: int = 0
    create_delay_rate: float = 0.0
    create_delay_seconds: float = 10.0
    #: The host reprices between search and rental: the machine is rented at
    #: `price_rise_factor` times the GPU price its offer listed (an ask's
    #: price is the host's to set; the rental takes the price of the moment).
    price_rise_next: int = 0
    price_rise_rate: float = 0.0
    price_rise_factor: float = 1.5
    #: The host reprices its downloads between search and rental: the machine
    #: is rented (and billed) at `transfer_price_rise_factor` times the
    #: ``inet_down_cost`` its offer listed.
    transfer_price_rise_next: int = 0
    transfer_price_rise_rate: float = 0.0
    transfer_price_rise_factor: float = 10.0
    #: Plain-text 429 "API requests too frequent" on any API request (a burst of N).
    rate_limit_next: int = 0
    rate_limit_rate: float = 0.0
    #: Per endpoint and key, answer 429 when requests come closer than this (real s).
    min_interval_s: float = 0.0
    #: The v1 instance list answers 200 with ``success: false``.
    list_error_next: int = 0
    #: New instances never leave ``loading``.
    stuck_loading_next: int = 0
    stuck_loading_rate: float = 0.0
    #: New instances fail during boot: ``exited`` or ``offline`` instead of ``running``.
    boot_fail_next: int = 0
    boot_fail_rate: float = 0.0
    #: New instances die `die_after_s` sim seconds after reaching ``running``.
    die_next: int = 0
    die_after_s: float = 300.0
    #: Death hazard of every running instance, per sim hour.
    death_rate_per_hour: float = 0.0
    #: Hosts with low ``reliability2`` fail at boot and die more often.
    reliability_failures: bool = True
    #: Offers appear and are rented away by others over time.
    offer_churn: bool = True
    #: Running but not proving. The prover of a new instance fails
    #: `prover_fault_after_s` sim seconds after it starts proving (``*_next``),
    #: or any proving prover fails with this hazard per sim hour (``*_rate_per_hour``):
    #: a CUDA error or an out-of-memory kill stops it with an error; a stuck
    #: prover keeps its proofs "in flight" and never finishes one.
    cuda_error_next: int = 0
    cuda_error_rate_per_hour: float = 0.0
    oom_next: int = 0
    oom_rate_per_hour: float = 0.0
    prover_stuck_next: int = 0
    prover_stuck_rate_per_hour: float = 0.0
    prover_fault_after_s: float = 600.0
    #: Interruptible (bid) instances are outbid and stopped: the next bid
    #: instance `outbid_after_s` after it runs (``outbid_next``), or with this
    #: hazard per sim hour at the minimum bid, less for higher bids.
    outbid_next: int = 0
    outbid_after_s: float = 600.0
    outbid_rate_per_hour: float = 0.0
    #: Host reboots of running instances, per sim hour (rebooting for 1-3 min).
    reboot_rate_per_hour: float = 0.0
    #: Sim seconds a destroyed instance stays listed (``cur_state: unloaded``).
    destroy_linger_s: float = 0.0
    #: The work source: the share of each prover's capacity the proving node
    #: hands out (1: a prover always has work; 0: none, it sits idle). Curio's
    #: provers pull work; with demand under the fleet's capacity they idle.
    work_share: float = 1.0
    #: The host loses contact for `offline_blip_s` (``actual_status`` offline,
    #: the prover unreachable, nothing proved), then comes back as it was:
    #: this hazard per sim hour of every running instance.
    offline_blip_rate_per_hour: float = 0.0
    offline_blip_s: float = 60.0

    def to_dict(self) -> dict[str, Any]:
        """The switches as JSON-ready data."""
        return asdict(self)

    def updated(self, changes: dict[str, Any]) -> Faults:
        """A copy with `changes` applied; unknown names or wrong types raise ValueError."""
        known = {f.name: f for f in fields(self)}
        clean: dict[str, Any] = {}
        for name, value in changes.items():
            if name not in known:
                raise ValueError(f"unknown fault {name!r}")
            current = getattr(self, name)
            if isinstance(current, bool):
                if not isinstance(value, bool):
                    raise ValueError(f"fault {name!r} takes true/false")
                clean[name] = value
            elif isinstance(current, int):
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise ValueError(f"fault {name!r} takes an integer >= 0")
                if name == "create_error_status" and not 500 <= value <= 599:
                    raise ValueError("create_error_status must be a 5xx status")
                clean[name] = value
            else:
                if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                    raise ValueError(f"fault {name!r} takes a number >= 0")
                if name.endswith("_rate") and not name.endswith("_per_hour") and value > 1:
                    raise ValueError(f"fault {name!r} is a probability in [0, 1]")
                if name == "work_share" and value > 1:
                    raise ValueError("work_share is a share of capacity in [0, 1]")
                clean[name] = float(value)
        return replace(self, **clean)


SCENARIOS: dict[str, Faults] = {
    # Nothing fails; the market still moves. For tests that want no surprises.
    "ideal": Faults(reliability_failures=False),
    # Roughly what a fleet meets on a normal day.
    "realistic": Faults(
        offer_taken_rate=0.05,
        create_error_rate=0.01,
        create_hang_rate=0.005,
        rate_limit_rate=0.01,
        stuck_loading_rate=0.03,
        boot_fail_rate=0.03,
        death_rate_per_hour=0.003,
        cuda_error_rate_per_hour=0.002,
        oom_rate_per_hour=0.002,
        prover_stuck_rate_per_hour=0.002,
        outbid_rate_per_hour=0.1,
        reboot_rate_per_hour=0.002,
        destroy_linger_s=30.0,
    ),
    # Everything goes wrong often: for testing the manager's recovery paths.
    "chaos": Faults(
        offer_taken_rate=0.25,
        create_error_rate=0.10,
        create_hang_rate=0.05,
        hang_seconds=45.0,
        rate_limit_rate=0.15,
        stuck_loading_rate=0.15,
        boot_fail_rate=0.15,
        death_rate_per_hour=0.2,
        cuda_error_rate_per_hour=0.05,
        oom_rate_per_hour=0.05,
        prover_stuck_rate_per_hour=0.05,
        outbid_rate_per_hour=0.5,
        reboot_rate_per_hour=0.05,
        destroy_linger_s=60.0,
    ),
}


def scenario(name: str) -> Faults:
    """A fresh copy of the named scenario's faults."""
    try:
        return replace(SCENARIOS[name])
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}; known: {sorted(SCENARIOS)}") from None
