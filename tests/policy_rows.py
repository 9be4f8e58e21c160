"""Snapshot rows and search results as the autopilot's policy reads them
(fleet_agent/fleet/policy.py), for the policy's tests."""

from __future__ import annotations

from typing import Any

__all__ = ["machine", "offer"]


def machine(iid: int, rate: float, dph: float = 0.4, **extra: Any) -> dict[str, Any]:
    """A healthy running machine, old enough to release, measured at `rate`."""
    return {
        "id": iid,
        "state": "running",
        "dph": dph,
        "expected_proofs_per_hour": rate,
        "proofs_per_hour": rate,
        "measured_proofs_per_hour": rate,
        "age_minutes": 600.0,
        **extra,
    }


def offer(offer_id: int, rate: float, dph: float) -> dict[str, Any]:
    """An offer as search_offers shows it."""
    return {"offer_id": offer_id, "est_proofs_per_hour": rate, "dph": dph}
