"""A prover's status port is the host's, and the host may be hostile (issue
42, finding 3): an answer is read only up to 64 KB, and the whole read has
one deadline, which a host trickling a byte at a time cannot stretch; the
address is a parsed IP address that is global (loopback only where the local
stack allows it), so a row cannot point a read or a drain at the cloud's
metadata service or the worker's own network. No refused address is ever
connected to, and the poll goes on for the other machines."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import httpx
import pytest
from temporalio.testing import ActivityEnvironment

from activities.fleet import FleetActivities
from fleet_agent.fleet.labels import create_label
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.fleet.prover_status import (
    READ_TIMEOUT_S,
    parse_status,
    read_statuses,
    send_drain,
)
from fleet_agent.models import PollRequest
from fleet_agent.store import Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.models import Instance
from fleet_agent.vast.pacing import NO_PACING
from testkit.fakes.vast_stub import StubRequest, VastStub, instances_page
from testkit.sim_helpers import SIM_RAM_GIB
from tests.helpers.vast_rows import NOW, instance_row


class _Hostile(BaseHTTPRequestHandler):
    mode = "huge"
    sent = 0  # bytes of the last answer that left before the reader hung up
    body = b""  # what mode "body" answers

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        try:
            _Hostile.sent = 0
            if self.mode == "body":
                self.wfile.write(self.body)
            elif self.mode == "huge":
                for _ in range(200):  # 20 MB, if anyone read it all
                    self.wfile.write(b" " * 100_000)
                    _Hostile.sent += 100_000
            else:  # a byte every 0.3 s, for a minute
                for _ in range(200):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.3)
        except OSError:
            return  # the reader gave up: as it should

    def do_POST(self) -> None:
        """A drain's answer: 200, then the same floods and trickles (issue 51,
        finding 3: a 200 MB answer was read whole, a trickle held the destroy
        for the write timeout)."""
        self.do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def host() -> Iterator[tuple[ThreadingHTTPServer, Instance]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    inst = Instance.model_validate(
        {"id": 9, "public_ipaddr": "127.0.0.1", "ports": {"9100/tcp": [{"HostPort": str(port)}]}}
    )
    yield server, inst
    server.shutdown()


@pytest.mark.parametrize(
    ("mode", "error"),
    [("huge", "status answer too large"), ("trickle", f"no answer within {READ_TIMEOUT_S:g} s")],
)
async def test_a_hostile_status_answer_is_cut_short(
    host: tuple[ThreadingHTTPServer, Instance], mode: str, error: str
) -> None:
    _Hostile.mode = mode
    reads = await read_statuses([host[1]], 9100, allow_loopback=True)
    # Read whole, the trickle would end after a minute as "not JSON"; the
    # huge one would be read to its 20 MB before being judged.
    assert not reads[9].ok and reads[9].error == error
    if mode == "huge":
        await asyncio.sleep(0.5)  # the writer sees the hang-up
        assert _Hostile.sent < 20_000_000


@pytest.mark.parametrize(
    ("mode", "error"),
    [
        ("huge", "drain answer too large"),
        ("trickle", f"no answer within {READ_TIMEOUT_S:g} s"),
        ("body", "drain answer too large"),
    ],
)
async def test_a_hostile_drain_answer_is_cut_short(
    host: tuple[ThreadingHTTPServer, Instance], mode: str, error: str
) -> None:
    """A drain reads at most 1 KB of the answer under the status read's one
    deadline; any such answer is a failure (the destroy tool then destroys
    at once: tests/fleet/test_drain.py)."""
    _Hostile.mode, _Hostile.body = mode, b'{"draining": true, "pad": "' + b"x" * 2_000 + b'"}'
    assert await send_drain(host[1], 9100, "token", allow_loopback=True) == error
    if mode == "huge":
        await asyncio.sleep(0.5)  # the writer sees the hang-up
        assert _Hostile.sent < 20_000_000
    _Hostile.mode, _Hostile.body = "body", b'{"draining": true}'
    assert await send_drain(host[1], 9100, "token", allow_loopback=True) is None


# ------------------------------------------------- what is believed of an answer

#: Answers within 64 KB that broke the reader: each raised out of the poll.
BROKEN_ANSWERS = {
    "nested 60,000 deep": b"[" * 60_000,  # RecursionError in the JSON parser
    "a 400-digit count": b'{"phase": "proving", "proofs_completed": 1' + b"0" * 400 + b"}",
}


@pytest.mark.parametrize("body", BROKEN_ANSWERS.values(), ids=BROKEN_ANSWERS.keys())
async def test_an_answer_that_breaks_a_parser_is_unreadable_not_a_failed_poll(
    host: tuple[ThreadingHTTPServer, Instance], body: bytes
) -> None:
    _Hostile.mode, _Hostile.body = "body", body
    reads = await read_statuses([host[1]], 9100, allow_loopback=True)
    assert not reads[9].ok and reads[9].error in (
        "status is not JSON",
        "status lacks phase or proofs_completed",
    )


def test_every_field_of_a_status_is_checked_at_the_edge(caplog: pytest.LogCaptureFixture) -> None:
    # Python's parser takes NaN, Infinity and integers past any float.
    text = (
        '{"phase": "proving", "proofs_completed": 7, "proofs_in_flight": -3,'
        ' "work_queued": NaN, "busy_seconds": Infinity, "last_proof_busy_seconds": 5,'
        ' "time": 1' + "0" * 400 + ', "started_at": -1e300, "last_proof_at": 1e300,'
        ' "params": {"bytes_fetched": 1e30},'
        r' "detail": "\u001b[2J\u0000ok\u202e\u2028then \ud800 ' + "x" * 5_000 + '"}'
    )
    caplog.set_level(logging.WARNING, logger="fleet_agent.fleet.prover_status")
    read = parse_status(json.loads(text), "instance 5")
    assert read.ok and read.phase == "proving" and read.proofs_completed == 7
    assert (read.proofs_in_flight, read.work_queued, read.busy_seconds) == (None, None, None)
    assert (read.time, read.started_at, read.last_proof_at) == (None, None, None)
    assert read.bytes_fetched == 0 and read.last_proof_busy_seconds is None
    assert len(read.detail) <= 200 and read.detail.isprintable()
    # Escapes, NUL, bidi marks, separators and the lone surrogate are spaces.
    assert read.detail.startswith("[2J ok then xxx") and read.detail.endswith("…")
    read.model_dump_json()  # a lone surrogate would not encode
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert warned.startswith("instance 5: status fields dropped")
    for field in ("proofs_in_flight", "work_queued", "busy_seconds", "time", "started_at"):
        assert field in warned, field


@pytest.mark.parametrize(
    "status",
    [
        {"phase": "p" * 6_000, "proofs_completed": 1},  # a 6 KB phase
        {"phase": "prov\x1bing", "proofs_completed": 1},
        {"phase": "proving\n", "proofs_completed": 1},
        {"phase": "proving", "proofs_completed": float("nan")},
        {"phase": "proving", "proofs_completed": -1},
        {"phase": "proving", "proofs_completed": 10**400},
    ],
    ids=["6 KB phase", "escape in phase", "newline in phase", "NaN count", "negative", "huge"],
)
def test_a_status_without_a_phase_word_or_a_count_is_unreadable(status: dict[str, Any]) -> None:
    read = parse_status(status)
    assert not read.ok and len(read.error) < 60


# ------------------------------------------------- where a status is read (SSRF)

GOOD_STATUS = {"phase": "proving", "proofs_completed": 3, "started_at": 1.0, "time": 2.0}

#: Addresses a host may put in its row, none of which is read.
HOSTILE_ADDRESSES = {
    31: "169.254.169.254",  # the cloud's metadata service
    32: "10.0.0.5",
    33: "127.0.0.1",  # loopback, with the switch off
    34: "169.254.169.254/latest/meta-data/iam#",
    35: "prover.example.com",
    36: " metadata.google.internal\n",  # a hostname, padded
    37: "1.2.3.4 5",
    38: "::ffff:10.0.0.5",  # a private address written as IPv6
    39: "2002:a00:5::1",  # a 6to4 tunnel to 10.0.0.5
    40: "224.0.0.1",
    41: "0.0.0.0",
    42: "100.64.0.1",  # carrier-grade NAT
    43: "fe80::1%eth0",
    44: "::1",
    45: "fec0::1",  # site-local: deprecated, `is_global` on Python 3.11
    46: "64:ff9b::a9fe:a9fe",  # NAT64 of the metadata service
    47: "64:ff9b:1::a9fe:a9fe",  # NAT64 for local use
    48: "64:ff9b::808:808",  # NAT64 of a global address: still not a host's address
}


def _at(iid: int, address: str, port: int | str = 41) -> Instance:
    ports = {"9100/tcp": [{"HostPort": str(port)}]}
    return Instance.model_validate({"id": iid, "public_ipaddr": address, "ports": ports})


class _Counting(BaseHTTPRequestHandler):
    """A prover that answers a good status and counts whoever asked."""

    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        _Counting.requests.append(f"GET {self.path}")
        body = json.dumps(GOOD_STATUS).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        _Counting.requests.append(f"POST {self.path}")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def counting() -> Iterator[int]:
    """A prover on 127.0.0.1 that counts requests; its port."""
    _Counting.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every URL a status read or drain sends, answered with GOOD_STATUS
    without a connection: what the code would have reached."""
    sent: list[str] = []

    async def handle(self: httpx.AsyncHTTPTransport, request: httpx.Request) -> httpx.Response:
        sent.append(str(request.url))
        return httpx.Response(200, json=GOOD_STATUS)

    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", handle)
    return sent


async def test_a_host_address_that_is_not_global_is_refused_before_any_request(
    wire: list[str],
) -> None:
    hostile = [_at(iid, address) for iid, address in HOSTILE_ADDRESSES.items()]
    bad_ports = [_at(51, "1.1.1.1", 0), _at(52, "1.1.1.1", 99_999)]
    good = [_at(61, "1.1.1.1"), _at(62, "2606:4700::1111")]
    reads = await read_statuses([*hostile, *bad_ports, *good], 9100)
    # The URL is built from the parsed address: IPv6 in brackets, nothing pasted.
    assert sorted(wire) == ["http://1.1.1.1:41/status", "http://[2606:4700::1111]:41/status"]
    assert reads[61].ok and reads[62].ok and reads[61].phase == "proving"
    for iid in [*HOSTILE_ADDRESSES, 51, 52]:
        error = reads[iid].error
        assert not reads[iid].ok, iid
        assert "\n" not in error and len(error) <= 120, error
        assert "refused" in error or "not an IP address" in error or "not a port" in error, error
    assert "loopback" in reads[33].error and "FLEET_PROVER_ALLOW_LOOPBACK" in reads[33].error
    assert "link-local" in reads[31].error and "private" in reads[32].error
    assert "not an IP address" in reads[34].error and "not an IP address" in reads[35].error
    assert "site-local" in reads[45].error and "169.254.169.254" in reads[46].error
    assert "NAT64 for local use" in reads[47].error


async def test_a_redirect_is_an_answer_never_followed(
    wire: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def moved(self: httpx.AsyncHTTPTransport, request: httpx.Request) -> httpx.Response:
        wire.append(str(request.url))
        return httpx.Response(302, headers={"Location": "http://169.254.169.254/latest/"})

    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", moved)
    reads = await read_statuses([_at(61, "1.1.1.1")], 9100)
    assert await send_drain(_at(61, "1.1.1.1"), 9100, "token") == "HTTP 302"
    assert not reads[61].ok and reads[61].error == "HTTP 302"
    assert wire == ["http://1.1.1.1:41/status", "http://1.1.1.1:41/drain"]


async def test_a_drain_goes_only_where_a_read_may(wire: list[str]) -> None:
    for iid, address in HOSTILE_ADDRESSES.items():
        refused = await send_drain(_at(iid, address), 9100, "token")
        assert refused is not None and "\n" not in refused, (iid, refused)
    assert wire == [], "the token went nowhere"
    assert await send_drain(_at(61, "1.1.1.1"), 9100, "token") is None
    assert wire == ["http://1.1.1.1:41/drain"]


async def test_loopback_is_read_only_when_the_local_stack_allows_it(counting: int) -> None:
    inst = _at(9, "127.0.0.1", counting)
    off = await read_statuses([inst], 9100)
    assert await send_drain(inst, 9100, "token") is not None
    assert not off[9].ok and "loopback" in off[9].error
    assert _Counting.requests == [], "with the switch off nothing connects"
    on = await read_statuses([inst], 9100, allow_loopback=True)
    assert on[9].ok and on[9].proofs_completed == 3
    assert _Counting.requests == ["GET /status"]
    # The switch opens loopback only: a private address stays refused.
    private = await read_statuses([_at(10, "10.0.0.5", counting)], 9100, allow_loopback=True)
    assert not private[10].ok and "private" in private[10].error


async def test_the_poll_goes_on_for_the_other_machines(store: Store, counting: int) -> None:
    rows = [
        instance_row(
            iid, create_label("a", 1, f"t{iid}"), public_ipaddr=address, ports=_ports(counting)
        )
        for iid, address in HOSTILE_ADDRESSES.items()
        if address not in ("127.0.0.1", "::1")  # loopback: read with the switch on
    ]
    mine = create_label("a", 1, "t70")
    rows.append(instance_row(70, mine, public_ipaddr="127.0.0.1", ports=_ports(counting)))

    def answer(req: StubRequest) -> tuple[int, Any]:
        if req.path == "/api/v1/instances/":
            return 200, instances_page(rows)
        return 404, "Not Found"

    with VastStub(answer) as stub:
        async with VastClient("k", stub.url, pacing=NO_PACING) as vast:
            for allow, reached in ((False, []), (True, ["GET /status"])):
                fleet = FleetActivities(
                    vast,
                    ProverSpec(
                        mode="curio_on_host", allow_loopback=allow, min_host_ram_gib=SIM_RAM_GIB
                    ),
                    store=store,
                    clock=lambda: NOW,
                )
                snap = await ActivityEnvironment().run(fleet.poll_fleet, PollRequest(agent_id="a"))
                assert snap.error == "" and len(snap.instances) == len(rows)
                assert _Counting.requests == reached, allow
                shown = {i.id: i.prover for i in snap.instances}
                assert shown[70].startswith("proving" if allow else "unreachable: address")
                for iid in HOSTILE_ADDRESSES.keys() - {33, 44}:
                    assert shown[iid].startswith("unreachable: "), (iid, shown[iid])


def _ports(port: int) -> dict[str, Any]:
    return {"9100/tcp": [{"HostIp": "0.0.0.0", "HostPort": str(port)}]}
