"""The simulator's HTTP layer (Starlette on uvicorn in a thread): what goes on
the wire, malformed requests, concurrency under slow faults, start and stop."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from simulator import DEFAULT_API_KEY, SimServer

AUTH = {"Authorization": f"Bearer {DEFAULT_API_KEY}"}


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer(seed=3, speed=0, scenario="ideal", offers=200, rate_limits=False) as s:
        yield s


def _raw(sim: SimServer, request: bytes) -> bytes:
    """Send `request` as is and read until the server closes or answers."""
    host, port = sim.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as conn:
        conn.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


def test_json_and_text_answers_keep_their_exact_headers_and_bytes(sim: SimServer) -> None:
    with httpx.Client(base_url=sim.url, headers=AUTH) as client:
        user = client.get("/api/v0/users/current/")
        assert user.status_code == 200
        # Verbatim: the vastai CLI compares the header, and bodies are json.dumps's bytes.
        assert user.headers["content-type"] == "application/json"
        assert user.content == json.dumps(user.json()).encode()
        assert user.headers["server"] == "vast-sim/1"
        assert int(user.headers["content-length"]) == len(user.content)
        missing = client.get("/nowhere")
        assert (missing.status_code, missing.text) == (404, "Not Found")
        assert missing.headers["content-type"] == "text/plain; charset=utf-8"
        wrong = client.post("/api/v0/gpu_types/")
        assert (wrong.status_code, wrong.text) == (405, "Method Not Allowed")
        assert client.patch("/api/v0/gpu_types/").status_code == 501
        assert client.head("/api/v0/gpu_types/").status_code == 501


def test_malformed_bodies_and_queries_get_the_apis_400s(sim: SimServer) -> None:
    with httpx.Client(base_url=sim.url, headers=AUTH) as client:
        bad_json = client.post(
            "/api/v0/bundles/", content=b"{not json", headers={"Content-Type": "application/json"}
        )
        assert bad_json.status_code == 400
        assert bad_json.json()["msg"] == "request body is not valid JSON"
        not_object = client.post("/api/v0/bundles/", json=[1, 2])
        assert not_object.status_code == 400
        bad_query = client.get("/api/v1/instances/", params={"select_filters": "{oops"})
        assert bad_query.status_code == 400
        assert bad_query.json()["msg"] == "select_filters must be JSON"
        # A percent-encoded JSON query reaches the API decoded once, as before.
        legacy = client.get("/api/v0/bundles/", params={"q": json.dumps({"limit": 3})})
        assert legacy.status_code == 200 and len(legacy.json()["offers"]) == 3
        # The legacy key in the query string still authenticates.
        keyed = httpx.get(f"{sim.url}/api/v0/users/current/?api_key={DEFAULT_API_KEY}")
        assert keyed.status_code == 200


def test_an_oversized_body_is_refused_and_the_connection_closed(sim: SimServer) -> None:
    reply = _raw(
        sim,
        b"POST /api/v0/bundles/ HTTP/1.1\r\nHost: x\r\n"
        + f"Authorization: Bearer {DEFAULT_API_KEY}\r\n".encode()
        + b"Content-Length: 2000000\r\n\r\n{",
    )
    assert reply.startswith(b"HTTP/1.1 413 ")
    assert b"connection: close" in reply.lower()


def test_a_chunked_body_is_read_and_capped(sim: SimServer) -> None:
    def chunks(body: bytes) -> Iterator[bytes]:
        yield body[:5]
        yield body[5:]

    with httpx.Client(base_url=sim.url, headers=AUTH) as client:
        found = client.post("/api/v0/bundles/", content=chunks(json.dumps({"limit": 2}).encode()))
        assert found.status_code == 200 and len(found.json()["offers"]) == 2
        huge = client.post("/api/v0/bundles/", content=chunks(b" " * (2 << 20)))
        assert huge.status_code == 413


def test_a_garbled_request_line_gets_a_400_not_a_crash(sim: SimServer) -> None:
    assert _raw(sim, b"NOT HTTP AT ALL\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert httpx.get(f"{sim.url}/api/v0/gpu_types/").status_code == 200


# Generous deadlines for what should take a moment, far below the faults'
# own durations: a test fails fast only when the simulator waited for a fault.
DEADLINE_S = 30.0
FAULT_S = 600.0


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    """Poll `condition` until it holds, failing after DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _done_within_deadline(call: Callable[[], object]) -> bool:
    """Run `call` in a daemon thread; whether it returned within DEADLINE_S."""
    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(timeout=DEADLINE_S)
    return not worker.is_alive()


def test_a_slow_create_does_not_hold_up_other_clients() -> None:
    """Other clients are answered while a create is held: all of them
    before the held create answers (it answers only when the simulator stops)."""
    with SimServer(seed=4, speed=0, scenario="ideal", offers=50, rate_limits=False) as sim:
        sim.market.set_faults(create_delay_next=1, create_delay_seconds=FAULT_S)
        offer = sim.market.offer_ids()[0]
        answers: list[object] = []

        def rent() -> None:
            try:
                answers.append(
                    httpx.put(
                        f"{sim.url}/api/v0/asks/{offer}/",
                        json={"image": "x"},
                        headers=AUTH,
                        timeout=FAULT_S,
                    )
                )
            except httpx.HTTPError as exc:
                answers.append(exc)

        slow = threading.Thread(target=rent, daemon=True)
        slow.start()
        _wait_until(lambda: sim.market.counters["create_delays"] >= 1, "the create to be held")
        with httpx.Client(base_url=sim.url, headers=AUTH) as client:
            for _ in range(20):
                assert client.get("/api/v1/instances/").status_code == 200
        assert answers == [], "the other clients waited for the held create"
    slow.join(timeout=DEADLINE_S)
    assert len(answers) == 1, "stopping the simulator ends the held create"


def test_stop_is_prompt_cuts_a_hang_short_and_frees_the_port() -> None:
    sim = SimServer(seed=5, speed=0, scenario="ideal", offers=50, rate_limits=False).start()
    port = int(sim.url.rsplit(":", 1)[1])
    sim.market.set_faults(create_hang_next=1, hang_seconds=FAULT_S)
    offer = sim.market.offer_ids()[0]
    answers: list[httpx.Response | Exception] = []

    def rent() -> None:
        try:
            answers.append(
                httpx.put(
                    f"{sim.url}/api/v0/asks/{offer}/",
                    json={"image": "x"},
                    headers=AUTH,
                    timeout=FAULT_S,
                )
            )
        except httpx.HTTPError as exc:
            answers.append(exc)

    hanging = threading.Thread(target=rent, daemon=True)
    hanging.start()
    _wait_until(lambda: bool(sim.market.state()["instances"]), "the hanging create to rent")
    # The hang lasts FAULT_S: a stop that waited for it would miss the deadline.
    assert _done_within_deadline(sim.stop), "stop waited for the hang"
    hanging.join(timeout=DEADLINE_S)
    # The machine is rented; its answer never comes as a success.
    assert len(answers) == 1
    assert not isinstance(answers[0], httpx.Response) or answers[0].status_code == 503
    with socket.socket() as again:
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))
    with pytest.raises(RuntimeError):
        _ = sim.url


def test_a_fixed_port_is_served_and_start_answers_at_once() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with SimServer(seed=6, speed=0, scenario="ideal", offers=20, port=port) as sim:
        assert sim.url == f"http://127.0.0.1:{port}"
        assert httpx.get(f"{sim.url}/api/v0/gpu_types/").status_code == 200
