"""The demand sources over real HTTP (issue 45): a stand-in Curio GUI that
answers JSON-RPC 2.0 ``CurioWeb.PSListQueue`` and ``/debug/metrics`` the
way Curio does, and a stand-in generic endpoint. The `read_demand`
activity never raises for what a source answers: a 20 MB answer, a
trickle, a redirect, an error page or garbage is a reading refused in one
line."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from temporalio.testing import ActivityEnvironment

from activities.demand import DemandActivities, source_from_env
from activities.demand_sources import CurioSource, HttpJsonSource, NoSource
from fleet_agent.demand.reading import DemandReadRequest, DemandReadResult
from fleet_agent.demand.settings import DemandEnv
from fleet_agent.fleet.prover_status import READ_TIMEOUT_S
from simulator.curio.webrpc import psvc_metrics, queue_row, rpc_error, rpc_result

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
# A Curio node's metrics page is long: the two lines we need sit among many.
_FILLER = "".join(f'go_gc_duration_seconds{{quantile="{i}"}} 0.0001\n' for i in range(3000))


class _Stand(BaseHTTPRequestHandler):
    mode: ClassVar[str] = "ok"
    rows: ClassVar[list[dict[str, Any]]] = []
    metrics: ClassVar[str] = ""
    generic: ClassVar[Any] = {}
    seen: ClassVar[list[tuple[str, str, Any, str]]] = []

    def _send(self, body: bytes, status: int = 200, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        if self.mode == "redirect":
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
        self.end_headers()
        try:
            if self.mode == "huge":
                for _ in range(200):  # 20 MB, if anyone read it all
                    self.wfile.write(b" " * 100_000)
            elif self.mode == "trickle":
                for _ in range(100):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.3)
            else:
                self.wfile.write(body)
        except OSError:
            return

    def do_POST(self) -> None:
        size = int(self.headers.get("Content-Length", "0"))
        call = json.loads(self.rfile.read(size))
        _Stand.seen.append(("POST", self.path, call, self.headers.get("Authorization", "")))
        if self.mode == "rpc_error":
            body = rpc_error("PSListQueue: failed to query proofshare_queue", call["id"])
        else:
            body = rpc_result(self.rows, call["id"])
        self._send(body, 302 if self.mode == "redirect" else 200)

    def do_GET(self) -> None:
        _Stand.seen.append(("GET", self.path, None, self.headers.get("Authorization", "")))
        status = {"redirect": 302, "error": 500}.get(self.mode, 200)
        if self.path == "/debug/metrics":
            self._send(self.metrics.encode(), status, "text/plain; version=0.0.4")
        else:
            body = self.generic if isinstance(self.generic, bytes) else json.dumps(self.generic)
            self._send(body if isinstance(body, bytes) else body.encode(), status)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def stand() -> Iterator[str]:
    _Stand.mode, _Stand.seen = "ok", []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stand)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _row(minutes_ago: float, task: int | None, done: bool) -> dict[str, Any]:
    # A NULL task id is sent as 0; the task id goes back to NULL once proved.
    obtained = NOW - timedelta(minutes=minutes_ago) + timedelta(microseconds=123456)
    return queue_row(f"bafyreib{minutes_ago:g}", obtained, compute_task_id=task, compute_done=done)


def _curio(rows: list[dict[str, Any]], queue: int, asks: int) -> None:
    _Stand.rows = rows
    _Stand.metrics = psvc_metrics(queue_count=queue, asks_created=asks, extra=_FILLER)


async def test_curio_queue_and_metrics_make_a_reading(stand: str) -> None:
    # Four open rows, three with a task id (the prove task gives one within
    # seconds): two wait for a machine (the gauge), two are being proved.
    _curio(
        [
            _row(2, None, False),
            _row(3, 32, False),
            _row(6, 31, False),
            _row(7, 33, False),
            _row(50, None, True),
        ],
        queue=2,
        asks=117,
    )
    result = await CurioSource(stand, stand, clock=lambda: NOW).read()
    assert result.refusal == "" and result.reading is not None
    r = result.reading
    assert (r.queued, r.in_flight, r.arrived_total, r.saturated) == (2, 2, 117, False)
    assert r.deadlines[0] == (NOW + timedelta(minutes=38)).replace(microsecond=123456)
    assert r.as_of == NOW and r.source == "curio"
    post = next(s for s in _Stand.seen if s[0] == "POST")
    assert post[1] == "/api/webrpc/v0"
    assert post[2] == {"jsonrpc": "2.0", "method": "CurioWeb.PSListQueue", "params": [], "id": 1}
    assert "2 queued, 2 in flight, 117 arrived" in result.summary


async def test_curio_above_its_low_water_mark_is_saturated(stand: str) -> None:
    # Above 5 waiting the node asks the market for no more work
    # (tasks/proofshare/task_request.go): what else waits there is unseen.
    _curio([_row(i, 40 + i, False) for i in range(6)], queue=6, asks=400)
    result = await CurioSource(stand, stand, clock=lambda: NOW).read()
    assert result.reading is not None and result.reading.saturated
    assert "saturated" in result.summary
    _curio([_row(i, 40 + i, False) for i in range(8)], queue=5, asks=400)
    result = await CurioSource(stand, stand, clock=lambda: NOW).read()
    assert result.reading is not None and not result.reading.saturated
    assert (result.reading.queued, result.reading.in_flight) == (5, 3)


async def test_a_stale_gauge_is_bounded_by_a_whole_list_not_by_a_cut_one(stand: str) -> None:
    # The gauge is set only when the Adder runs (tasks/proofshare/
    # task_request.go): while a request task loops it may count rows
    # machines took since. A list under 15 rows holds every open row.
    _curio([_row(i, 40 + i, False) for i in range(3)], queue=7, asks=400)
    result = await CurioSource(stand, stand, clock=lambda: NOW).read()
    assert result.reading is not None and result.reading.whole
    assert (result.reading.queued, result.reading.in_flight) == (3, 0)
    assert not result.reading.saturated
    # 15 rows: PSListQueue's LIMIT may have cut older open rows; the gauge stands.
    _curio([_row(i, 40 + i, False) for i in range(15)], queue=7, asks=400)
    result = await CurioSource(stand, stand, clock=lambda: NOW).read()
    assert result.reading is not None and not result.reading.whole
    assert (result.reading.queued, result.reading.in_flight) == (7, 8)


async def test_curio_failures_are_refusals(stand: str) -> None:
    _curio([], queue=0, asks=0)
    _Stand.mode = "rpc_error"
    assert (await CurioSource(stand, stand).read()).refusal == "PSListQueue answered an error"
    _Stand.mode = "redirect"
    assert (await CurioSource(stand, stand).read()).refusal == "PSListQueue: HTTP 302"
    _Stand.mode = "huge"
    assert (await CurioSource(stand, stand).read()).refusal == "the answer is larger than 64 KB"


def _generic(**changes: Any) -> dict[str, Any]:
    body = {
        "as_of": "2026-12-06T12:00:00Z",
        "queued": 4,
        "in_flight": 2,
        "arrived_total": 9000,
        "done_total": 8990,
        "late_total": 3,
        "deadlines": ["2026-12-06T12:25:00Z"],
        "saturated": False,
    }
    return {**body, **changes}


async def test_the_generic_source_reads_the_documented_shape_with_its_token(stand: str) -> None:
    _Stand.generic = _generic()
    result = await HttpJsonSource(stand + "/demand", "tok-123").read()
    assert result.reading is not None
    assert (result.reading.queued, result.reading.late_total) == (4, 3)
    assert _Stand.seen[-1][:2] == ("GET", "/demand")
    assert _Stand.seen[-1][3] == "Bearer tok-123"
    assert "tok-123" not in result.model_dump_json()


@pytest.mark.parametrize(
    ("mode", "body", "says"),
    [
        ("huge", None, "the answer is larger than 64 KB"),
        ("redirect", None, "HTTP 302"),
        ("error", None, "HTTP 500"),
        ("ok", b"<html>not json</html>", "the answer is not JSON"),
        ("ok", b"[" * 60_000, "the answer is not JSON"),
        ("ok", b'{"as_of": "2026-12-06T12:00:00Z", "queued": NaN}', "queued is not a whole number"),
        ("ok", _generic(in_flight=-5), "in_flight is out of range"),
        ("ok", _generic(as_of="2026-13-45T99:00:00Z"), "as_of is not an RFC 3339 time"),
    ],
)
async def test_the_activity_refuses_bad_answers_and_never_raises(
    stand: str, mode: str, body: Any, says: str
) -> None:
    _Stand.mode, _Stand.generic = mode, body if body is not None else _generic()
    activities = DemandActivities(HttpJsonSource(stand + "/demand"))
    result = await ActivityEnvironment().run(
        activities.read_demand, DemandReadRequest(agent_id="a")
    )
    assert isinstance(result, DemandReadResult)
    assert result.reading is None and result.refusal.startswith(says)
    assert result.summary.startswith(f"demand (http): no reading: {says}")


async def test_a_trickling_source_meets_one_deadline(stand: str) -> None:
    _Stand.mode, _Stand.generic = "trickle", _generic()
    started = time.monotonic()
    result = await HttpJsonSource(stand + "/demand").read()
    assert result.refusal == f"no answer within {READ_TIMEOUT_S:g} s"
    assert time.monotonic() - started < READ_TIMEOUT_S * 4  # not the 30 s trickle


async def test_a_closed_port_is_a_refusal() -> None:
    result = await HttpJsonSource("http://127.0.0.1:9/demand").read()
    assert result.refusal.startswith("connection failed")


class _Broken:
    name = "http"

    async def read(self) -> DemandReadResult:
        raise KeyError("a bug")


async def test_a_bug_in_a_source_is_a_refusal_too() -> None:
    result = await ActivityEnvironment().run(
        DemandActivities(_Broken()).read_demand, DemandReadRequest()
    )
    assert result.refusal == "reading failed (KeyError)"


async def test_no_source_says_so() -> None:
    source = source_from_env(DemandEnv.load({}))
    assert isinstance(source, NoSource)
    result = await ActivityEnvironment().run(DemandActivities().read_demand, DemandReadRequest())
    assert result.reading is None and "FLEET_DEMAND_SOURCE" in result.refusal


def test_the_settings_pick_the_client() -> None:
    curio = DemandEnv.load(
        {"FLEET_DEMAND_SOURCE": "curio", "FLEET_DEMAND_URL": "http://10.1.2.3:4701"}
    )
    assert isinstance(source_from_env(curio), CurioSource)
    assert curio.metrics_url == "http://10.1.2.3:12300"
    http = DemandEnv.load(
        {"FLEET_DEMAND_SOURCE": "http", "FLEET_DEMAND_URL": "https://d.example/x"}
    )
    assert isinstance(source_from_env(http), HttpJsonSource)
