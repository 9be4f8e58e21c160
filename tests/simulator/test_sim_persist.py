"""The simulator's state survives a restart: offers, instances, clock, counters,
faults; the provers answer again; unusable files are refused, never overwritten."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from simulator import SimServer, StateError
from simulator.persist import market_to_json
from testkit.sim_helpers import advance_until, find_offer, prover_status, rent, row, truth
from tests.helpers import eventually


def _server(path: Path | None, seed: int = 41) -> SimServer:
    return SimServer(
        seed=seed,
        speed=0,
        scenario="realistic",
        offers=400,
        rate_limits=False,
        start_epoch=1.8e9,
        state_path=path,
    )


def test_a_restarted_simulator_goes_on_where_it_stopped(tmp_path: Path) -> None:
    path = tmp_path / "var" / "sim-state.json"
    with _server(path) as first:
        assert not first.restored
        first.market.set_faults(scenario_name="ideal", death_rate_per_hour=0.01)
        iids = [rent(first, find_offer(first)["id"], label=f"m{n}") for n in range(2)]
        advance_until(first, lambda: truth(first, iids[0])["prover_phase"] == "proving", step=120)
        first.market.advance(3600)
        rows = {i: row(first, i) for i in iids}
        done = prover_status(first, iids[0])["proofs_completed"]
        offers = first.market.offer_ids()
        before = market_to_json(first.market)  # after the last API call
    assert path.exists()  # saved on stop

    with _server(path) as second:
        assert second.restored
        assert second.market.now() == pytest.approx(before["now"])  # speed 0: no time passed
        assert second.market.offer_ids() == offers
        assert second.market.faults.death_rate_per_hour == 0.01
        assert second.market.scenario == "ideal"
        assert second.market.counters == before["counters"]
        for iid, old in rows.items():
            new = row(second, iid)
            assert {k: new[k] for k in old if k != "ports"} == {
                k: v for k, v in old.items() if k != "ports"
            }
        # The prover answers on the new server, on the port its row now maps.
        assert prover_status(second, iids[0])["proofs_completed"] == done
        second.market.advance(3600)
        assert prover_status(second, iids[0])["proofs_completed"] > done


def test_the_market_goes_on_as_if_it_had_never_stopped(tmp_path: Path) -> None:
    """Same seed, same calls: a restart in the middle changes nothing."""
    path = tmp_path / "sim.json"

    def run(restart: bool) -> list[tuple[object, ...]]:
        sim = _server(path if restart else None).start()
        try:
            for _ in range(3):
                rent(sim, find_offer(sim)["id"])
            sim.market.advance(2 * 3600)
            if restart:
                sim.stop()
                sim = _server(path).start()
            sim.market.advance(6 * 3600)
            # Rentals after the restart get the ids they would have had: the
            # instance ids' stream is saved too (the first id is saved as
            # the next one; the second is drawn from the stream).
            for _ in range(2):
                rent(sim, find_offer(sim)["id"])
            return [
                (i["id"], i["actual_status"], i["proofs_completed"], i["prover_phase"])
                for i in sim.market.state()["instances"]
            ] + [(o,) for o in sim.market.offer_ids()]
        finally:
            sim.stop()

    assert run(restart=True) == run(restart=False)


async def test_the_state_is_saved_while_it_runs(tmp_path: Path) -> None:
    path = tmp_path / "sim.json"
    with _server(path) as sim:
        rent(sim, find_offer(sim)["id"])

        async def saved() -> bool:
            return path.exists() and len(json.loads(path.read_text())["instances"]) == 1

        assert await eventually(saved, timeout=10, what="a save while running")


@pytest.mark.parametrize(
    "content", ["{not json", json.dumps([1, 2]), json.dumps({"format": 999}), '{"format": 1}']
)
def test_an_unusable_state_file_is_refused_and_kept(tmp_path: Path, content: str) -> None:
    path = tmp_path / "sim.json"
    path.write_text(content)
    with pytest.raises(StateError):
        _server(path)
    assert path.read_text() == content


def test_a_state_of_another_seed_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sim.json"
    with _server(path, seed=1):
        pass
    with pytest.raises(StateError, match="seed 1"):
        _server(path, seed=2)


def test_without_a_path_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with _server(None) as sim:
        assert httpx.get(f"{sim.url}/_sim/state").status_code == 200
    assert list(tmp_path.iterdir()) == []
