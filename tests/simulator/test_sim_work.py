"""The simulator's work source and offline blips (issue 41): provers that sit
idle when the node hands out no work, busy a share of the time when it hands
out less than they can do, and hosts that lose contact for a minute and come
back as they were. Served over HTTP, read by the fleet's own status parser."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from fleet_agent.fleet.prover_status import parse_status
from fleet_agent.fleet.provers import ProverTrack, advance, not_proving_reason
from fleet_agent.vast.models import Instance
from simulator import SimServer
from testkit.sim_helpers import advance_until, find_offer, prover_status, rent, row, truth


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(
        seed=31, speed=0, scenario="ideal", offers=3000, rate_limits=False, start_epoch=1.8e9
    ) as server:
        yield server


def _proving(sim: SimServer) -> int:
    iid = rent(sim, find_offer(sim)["id"])
    advance_until(sim, lambda: truth(sim, iid)["prover_phase"] == "proving", step=120)
    return iid


def _status(sim: SimServer, iid: int) -> dict[str, Any]:
    """The prover's status as its port answers it (in process: the reads are many)."""
    answer, body = sim.market.prover_endpoint(iid)
    assert answer == "ok" and body is not None, answer
    return dict(body)


def _state(sim: SimServer, iid: int) -> str:
    shown = sim.market.show_instance(iid)
    assert shown is not None
    return str(shown["actual_status"])


def _watch(
    sim: SimServer, iid: int, minutes: int, track: ProverTrack | None, every: int = 2
) -> ProverTrack:
    """Read the prover every `every` minutes for `minutes`, as the monitor does."""
    for _ in range(minutes // every):
        sim.market.advance(60 * every)
        read = parse_status(_status(sim, iid))
        track = advance(track, read, iid, sim.market.now(), 20.0)
        assert not_proving_reason(track, sim.market.now(), 20.0) is None, track
    assert track is not None
    return track


def test_a_prover_with_no_work_sits_idle_and_is_healthy(sim: SimServer) -> None:
    iid = _proving(sim)
    track = _watch(sim, iid, 60, None)
    assert track.measured_proofs_per_hour is not None
    done = _status(sim, iid)["proofs_completed"]
    sim.market.set_faults(work_share=0.0)
    track = _watch(sim, iid, 180, track)  # three hours with nothing to prove
    status = prover_status(sim, iid)
    assert status["proofs_completed"] == done
    assert (status["proofs_in_flight"], status["work_queued"]) == (0, 0)
    assert track.idle


def test_a_prover_given_a_fifth_of_its_capacity_proves_a_fifth_and_measures_its_rate(
    sim: SimServer,
) -> None:
    iid = _proving(sim)
    sim.market.set_faults(work_share=0.2)
    before = _status(sim, iid)
    track = _watch(sim, iid, 240, None)
    after = _status(sim, iid)
    rate = truth(sim, iid)["proofs_per_hour"]
    proved = after["proofs_completed"] - before["proofs_completed"]
    assert proved == pytest.approx(0.2 * rate * 4, abs=2)
    assert after["busy_seconds"] - before["busy_seconds"] == pytest.approx(0.2 * 4 * 3600, rel=1e-6)
    # Measured on its busy clock: its full rate, not the fifth it was given.
    assert track.measured_proofs_per_hour == pytest.approx(rate, rel=0.03)


def test_a_stuck_prover_holds_its_work_and_is_found_out(sim: SimServer) -> None:
    iid = _proving(sim)
    sim.market.set_faults(work_share=0.3)
    track = _watch(sim, iid, 60, None)
    assert sim.market.prover_fault(iid, "stuck")
    judged = None
    for minute in range(1, 40):
        sim.market.advance(60)
        track = advance(track, parse_status(_status(sim, iid)), iid, sim.market.now(), 20.0)
        if judged is None and not_proving_reason(track, sim.market.now(), 20.0) is not None:
            judged = minute
    assert judged is not None and judged <= 20


def test_an_offline_blip_comes_back_as_it_was(sim: SimServer) -> None:
    iid = _proving(sim)
    sim.market.advance(600)
    before = prover_status(sim, iid)
    sim.market.set_faults(offline_blip_s=60.0)
    assert sim.market.set_instance_state(iid, "blip")
    assert row(sim, iid)["actual_status"] == "offline"
    sim.market.advance(30)
    assert row(sim, iid)["actual_status"] == "offline"
    sim.market.advance(31)
    assert row(sim, iid)["actual_status"] == "running"
    after = prover_status(sim, iid)
    assert after["started_at"] == before["started_at"], "the same prover process"
    assert after["proofs_completed"] >= before["proofs_completed"]


def test_blips_at_a_rate_come_and_go_on_every_running_machine(sim: SimServer) -> None:
    sim.market.set_faults(offline_blip_rate_per_hour=2.0, offline_blip_s=90.0)
    iid = _proving(sim)
    seen = []
    for _ in range(6 * 60):
        sim.market.advance(30)
        seen.append(_state(sim, iid))
    spells = sum(1 for a, b in itertools.pairwise(seen) if a != "offline" == b)
    assert 4 <= spells <= 24, spells  # about 2 an hour over 6 hours
    assert seen[-1] in ("running", "offline") and truth(sim, iid)["prover_phase"] == "proving"


def test_some_rows_come_padded_and_the_fleet_reads_them_stripped(sim: SimServer) -> None:
    """A third of the hosts pad their address and status text, as the vastai
    CLI's `_strip_strings` (vastai/api/instances.py) expects of real rows."""
    padded = 0
    for _ in range(12):
        iid = rent(sim, find_offer(sim)["id"])
        shown = row(sim, iid)
        if shown["public_ipaddr"].endswith("\n"):
            padded += 1
            inst = Instance.model_validate(shown)
            assert inst.public_ipaddr == "127.0.0.1"
        sim.market.set_instance_state(iid, "stop")
    assert padded >= 1
