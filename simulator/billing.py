"""What the simulated vast.ai bills for an instance, kept in sim time.

vast.ai's billing help: the active rental (GPU) cost is charged for every
second an instance is active, storage for every second it exists, and
bandwidth per GB. The simulator reads that as: from rental to destruction,
``dph_total`` (GPU, or the bid, plus the rented disk) every second the
instance is not stopped — scheduling, loading, running, frozen, rebooting and
dead included, since the contract holds the GPUs until it is destroyed —
``storage_total_cost`` while stopped, nothing after; and the download traffic
it models (the prover's parameter fetch) at ``inet_down_cost`` per GB.
`charges` is what the control API reports (``GET /_sim/charges``), for tests
that hold the fleet's own ledger against it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .catalogue import offer_pricing

if TYPE_CHECKING:
    from .instances import SimInstance

__all__ = ["BYTES_PER_BILLED_GB", "BYTES_PER_BILLED_KB", "billed_dph", "charges", "prices"]

#: Units of the rows' traffic counters (``inet_*_billed``, KB) and of the
#: per-GB prices (``inet_*_cost``): our reading, in binary units (the service
#: does not document them; docs/SIMULATOR.md).
BYTES_PER_BILLED_KB = 1024
BYTES_PER_BILLED_GB = 1024**3


def prices(offer: dict[str, Any], disk_gb: float, bid_price: float | None) -> tuple[float, float]:
    """(``dph_total``, ``storage_total_cost``) as an instance row shows them, $/hour:
    the GPU (the bid, for a bid instance) plus the rented disk, and the disk alone."""
    pricing = offer_pricing(offer, allocated_storage_gb=disk_gb, bid=bid_price is not None)
    storage = float(pricing["storage_total_cost"])
    if bid_price is not None:
        return round(bid_price + storage, 6), storage
    return float(pricing["dph_total"]), storage


def billed_dph(inst: SimInstance) -> float:
    """What the instance costs per hour now (its machine advanced by the caller)."""
    m = inst.machine
    if m.destroyed_at is not None:
        return 0.0
    dph_total, storage = prices(inst.offer, m.disk_gb, inst.bid_price)
    return storage if m.status == "stopped" else dph_total


def charges(inst: SimInstance) -> dict[str, Any]:
    """What has been billed for the instance so far ($, 6 decimals), up to its
    machine's time (advanced by the caller) or its destruction."""
    m = inst.machine
    end = m.destroyed_at if m.destroyed_at is not None else m.t
    life = max(0.0, end - m.created_at)
    stopped = min(m.stopped_s, life)
    dph_total, storage = prices(inst.offer, m.disk_gb, inst.bid_price)
    time_usd = (life - stopped) / 3600.0 * dph_total + stopped / 3600.0 * storage
    download_gb = m.params_bytes / BYTES_PER_BILLED_GB
    bandwidth_usd = download_gb * float(inst.offer["inet_down_cost"])
    return {
        "id": inst.id,
        "label": inst.label,
        "started_at": m.created_at,
        "ended_at": m.destroyed_at,
        "seconds": round(life, 3),
        "stopped_seconds": round(stopped, 3),
        "dph_total": dph_total,
        "storage_total_cost": storage,
        "download_gb": round(download_gb, 6),
        "time_usd": round(time_usd, 6),
        "bandwidth_usd": round(bandwidth_usd, 6),
        "total_usd": round(time_usd + bandwidth_usd, 6),
    }
