"""A prover's status port over HTTP: a running machine answers, a frozen one
holds the request unanswered, a stopped one drops the connection; keep-alive
connections see the machine change between requests."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from simulator import SimServer, prover_http
from testkit.sim_helpers import advance_until, api, find_offer, prover_url, rent, row


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(seed=32, speed=0, scenario="ideal", offers=500, rate_limits=False) as server:
        yield server


def _act(sim: SimServer, iid: int, action: str) -> None:
    with api(sim) as c:
        c.post(f"/_sim/instances/{iid}/{action}").raise_for_status()


def test_running_frozen_and_stopped_machines_on_one_keep_alive_connection(
    sim: SimServer,
) -> None:
    iid = rent(sim, find_offer(sim)["id"])
    advance_until(sim, lambda: row(sim, iid)["actual_status"] == "running", step=30)
    url = prover_url(row(sim, iid))
    with httpx.Client(timeout=1.0) as client:
        first = client.get(url)
        assert first.status_code == 200 and first.headers["content-type"] == "application/json"
        assert first.headers["server"] == "snark-prover-sim/1"
        assert client.get(url.replace("/status", "/nope")).json() == {"error": "not found"}
        _act(sim, iid, "freeze")
        started = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            client.get(url)  # the same pooled connection, held without an answer
        assert time.monotonic() - started >= 0.9
        _act(sim, iid, "unfreeze")
        assert client.get(url).status_code == 200
        _act(sim, iid, "stop")
        with pytest.raises(httpx.RemoteProtocolError):
            client.get(url)


def test_a_frozen_machines_request_ends_when_the_simulator_stops(
    sim: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A frozen machine holds a request this long (real seconds): far past the
    # deadline below, so only a stop that cuts the hold short meets it.
    monkeypatch.setattr(prover_http, "_HANG_S", 600.0)
    iid = rent(sim, find_offer(sim)["id"])
    advance_until(sim, lambda: row(sim, iid)["actual_status"] == "running", step=30)
    url = prover_url(row(sim, iid))
    _act(sim, iid, "freeze")
    with httpx.Client(timeout=0.3) as client, pytest.raises(httpx.ReadTimeout):
        client.get(url)
    # Generous: a loaded machine stops slowly too, but not in ten minutes.
    stopper = threading.Thread(target=sim.stop, daemon=True)
    stopper.start()
    stopper.join(timeout=30)
    assert not stopper.is_alive(), "stop waited for the frozen request"
    with pytest.raises(httpx.ConnectError):
        httpx.get(url, timeout=1.0)
