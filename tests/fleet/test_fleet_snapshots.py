"""The fleet snapshots the monitor's poll leaves in the store, on both backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleet_agent.fleet.snapshot import FleetInstance, FleetSnapshot
from fleet_agent.store import FleetSnapshots, Store
from tests.helpers.store_backends import store_on_both_backends  # noqa: F401  (a fixture)

AGENT = "fleet-agent"
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _inst(iid: int, state: str) -> FleetInstance:
    return FleetInstance(
        id=iid, label=f"{AGENT}/x", state=state, gpu="A100", num_gpus=1, dph=1.0, proofs_per_hour=0
    )


def test_the_latest_snapshot_replaces_the_last(store: Store) -> None:
    snaps = FleetSnapshots(store)
    assert snaps.latest(AGENT) is None
    snaps.save(AGENT, FleetSnapshot(instances=[_inst(1, "loading")]), T0)
    snaps.save(AGENT, FleetSnapshot(instances=[_inst(2, "running")]), T0 + timedelta(seconds=30))
    snaps.save("other", FleetSnapshot(), T0)
    latest = snaps.latest(AGENT)
    assert latest is not None
    assert latest.taken_at == T0 + timedelta(seconds=30)
    assert [i.id for i in latest.snapshot.instances] == [2]
    store.delete_agent(AGENT)
    assert snaps.latest(AGENT) is None and snaps.latest("other") is not None
    with pytest.raises(ValueError, match="at"):
        snaps.save(AGENT, FleetSnapshot(), T0.replace(tzinfo=None))
